"""Run by the system's python3 (python3-uno): LibreOffice saves password-protected Word and Excel
97-2003 files, as no Python package here can write them (msoffcrypto-tool encrypts OOXML only).

    python3 tests/lo_password.py OUTDIR PASSWORD

writes OUTDIR/locked.doc and OUTDIR/locked.xls. LibreOffice cannot save a .ppt with a password.
"""

import os
import subprocess
import sys
import time

import uno  # type: ignore[import-not-found]
from com.sun.star.beans import PropertyValue  # type: ignore[import-not-found]


def prop(name, value):
    p = PropertyValue()
    p.Name, p.Value = name, value
    return p


def main(out, password):
    pipe = f"deskdex-test-{os.getpid()}"
    soffice = subprocess.Popen(["soffice", "--headless", "--invisible", "--norestore", "--nologo",
                                f"-env:UserInstallation=file://{out}/lo-profile", f"--accept=pipe,name={pipe};urp;"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        local = uno.getComponentContext()
        resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
        for _ in range(600):
            try:
                ctx = resolver.resolve(f"uno:pipe,name={pipe};urp;StarOffice.ComponentContext")
                break
            except Exception:
                time.sleep(0.1)
        else:
            sys.exit("LibreOffice did not answer on its pipe")
        desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
        for factory, filter_name, name in (("swriter", "MS Word 97", "locked.doc"), ("scalc", "MS Excel 97", "locked.xls")):
            doc = desktop.loadComponentFromURL(f"private:factory/{factory}", "_blank", 0, (prop("Hidden", True),))
            if factory == "swriter":
                doc.Text.setString("secret words behind a password")
            else:
                doc.Sheets.getByIndex(0).getCellByPosition(0, 0).setString("secret cell behind a password")
            doc.storeToURL(f"file://{out}/{name}", (prop("FilterName", filter_name), prop("Password", password)))
            doc.close(True)
        try:
            desktop.terminate()
        except Exception:  # the bridge goes down with the office
            pass
        soffice.wait(60)
    finally:
        if soffice.poll() is None:
            soffice.kill()
            soffice.wait()


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]), sys.argv[2])
