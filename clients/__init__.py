"""The clients of the daemon: the ``deskdex`` command line (launch, cli, reading, managing), the socket
client, result rendering, the user service and the tray.

A regular package, not an implicit namespace one: setuptools' default editable install cannot import a
namespace subpackage mapped with package-dir from outside its parent's folder (pypa/setuptools#4943),
so ``pip install -e .`` would fail on ``import deskdex.clients`` (tests/test_installed.py checks it).
"""
