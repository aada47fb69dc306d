"""Debian's headless Chromium driven by Selenium, for the web UI's end-to-end tests.

The browser and its driver are the system's (/usr/bin/chromium, /usr/bin/chromedriver, packages
chromium and chromium-driver), named to Selenium through ``Service(executable_path=...)`` and
``binary_location`` so that Selenium Manager never looks anything up or downloads a browser. Each
browser gets a fresh profile and a download folder in a temporary folder, and keeps off the network:
no sync, no component updates, no background requests, no QUIC."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

CHROMIUM = os.environ.get("DESKDEX_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("DESKDEX_CHROMEDRIVER", "/usr/bin/chromedriver")
WINDOW = (1280, 800)  # the screenshots' size too (docs/screenshots/)


def missing() -> str:
    """Why no browser can run here ('' when it can): what is absent and the package that has it."""
    why = []
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            why.append(f"{path} (Debian package {package})")
    try:
        import selenium  # noqa: F401
    except ImportError:
        why.append("the Python package selenium")
    return ("missing " + ", ".join(why)) if why else ""


class Browser:
    """One headless Chromium with its own profile and download folder, stopped by ``quit``."""

    def __init__(self, window: tuple[int, int] = WINDOW) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.tmp = Path(tempfile.mkdtemp(prefix="deskdex-browser-"))
        self.downloads = self.tmp / "downloads"
        self.downloads.mkdir()
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-default-apps", "--disable-extensions", "--disable-dev-shm-usage",
                    "--no-default-browser-check", "--password-store=basic",
                    f"--user-data-dir={self.tmp / 'profile'}", f"--window-size={window[0]},{window[1]}"):
            options.add_argument(arg)
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            options.add_argument("--no-sandbox")  # Chromium refuses to start as root with its sandbox
        options.add_experimental_option("prefs", {
            "download.default_directory": str(self.downloads),
            "download.prompt_for_download": False,
            "safebrowsing.enabled": False,
        })
        try:
            self.driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        # Headless Chromium saves downloads only when told where through DevTools.
        self.driver.execute_cdp_cmd("Page.setDownloadBehavior",
                                    {"behavior": "allow", "downloadPath": str(self.downloads)})

    def get(self, url: str) -> None:
        self.driver.get(url)

    def find(self, css: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def wait(self, cond: Callable[[], Any], timeout: float = 30, what: str = "") -> Any:
        """Poll ``cond`` until it returns something true; AssertionError naming ``what`` and the page."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = cond()
            except Exception as exc:  # an element replaced while read (search as you type): ask again
                got, last = None, exc
            else:
                last = None
            if got:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout:g} s for {what or cond}; last error {last!r}; page "
                                     f"{self.driver.current_url}:\n{self.driver.page_source[:3000]}")
            time.sleep(0.05)

    def download(self, name: str, timeout: float = 30) -> Path:
        """The file ``name`` once the browser has saved it whole (no .crdownload left)."""
        path = self.downloads / name

        def done() -> bool:
            return path.exists() and not any(p.suffix == ".crdownload" for p in self.downloads.iterdir())
        self.wait(done, timeout, f"the download of {name} (have {sorted(p.name for p in self.downloads.iterdir())})")
        return path

    def clear_downloads(self) -> None:
        for p in self.downloads.iterdir():
            p.unlink()

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(path))

    def quit(self) -> None:
        try:
            self.driver.quit()  # ends chromedriver and the browser it started
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


def skip_without_browser() -> None:
    why = missing()
    if why:
        pytest.skip(f"no headless browser: {why}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A headless Chromium for the module; skipped, saying why, where Chromium or its driver is absent."""
    skip_without_browser()
    b = Browser()
    try:
        yield b
    finally:
        b.quit()


def want_screenshots() -> bool:
    """Screenshots for docs/screenshots/ are written only when asked (DESKDEX_SCREENSHOTS=1), so a
    test run does not rewrite committed files."""
    return os.environ.get("DESKDEX_SCREENSHOTS") == "1"
