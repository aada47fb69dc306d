"""``python -m deskdex``: the same as the ``deskdex`` command."""

import sys

from deskdex.clients.launch import main

sys.exit(main())
