"""Headless Chromium (Debian's chromium and chromium-driver) driven by Selenium, and reading
a copapy scope page through the Bokeh models the browser holds (what it was sent)."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
MISSING = ("the scope's browser tests need Debian's chromium and its driver (apt-get install "
           "chromium chromium-driver) and selenium (pip install 'copapy[dev]')")

#: finds the view of the model named NAME (Bokeh keeps widgets in shadow DOM)
FIND_VIEW = """
const model = Bokeh.documents[0].get_model_by_name(arguments[0]);
function* walk(v) { yield v; for (const c of (v.child_views || [])) yield* walk(c); }
for (const root of Object.values(Bokeh.index))
  for (const v of walk(root)) if (v.model === model) return v;
return null;
"""


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium WebDriver; the test FAILS (not skips) when it is not installed."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        raise AssertionError(f"{MISSING} ({exc})") from None
    assert os.path.exists(CHROMIUM) and shutil.which(DRIVER), MISSING
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,800",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
    """``check()``'s first true result, or AssertionError naming ``what`` and the last one."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:  # the page is still loading
            last = exc
        else:
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout} s (last: {last!r})")


def open_page(driver: Any, url: str) -> None:
    driver.get(url)
    wait_for("the scope page's Bokeh document", lambda: driver.execute_script(
        "return window.Bokeh !== undefined && Bokeh.documents.length > 0 && "
        "Bokeh.documents[0].get_model_by_name('banner') !== null"))


def model(driver: Any, name: str, attr: str) -> Any:
    return driver.execute_script(
        "return Bokeh.documents[0].get_model_by_name(arguments[0])[arguments[1]]", name, attr)


def banner(driver: Any) -> str:
    return str(model(driver, "banner", "text"))


def latest(driver: Any) -> dict[str, float]:
    """The newest value of each signal as the page shows it."""
    text = str(model(driver, "latest", "text"))
    return {k: float(v) for k, v in re.findall(r"data-label='([^']+)'>([^<]+)<", text)}


def plotted(driver: Any, label: str) -> tuple[int, float]:
    """(points the browser's plot holds, the last time plotted) of ``label``."""
    n, t = driver.execute_script(
        "const d = Bokeh.documents[0].get_model_by_name('data').data;"
        "return [d[arguments[0]].length, d.time.length ? d.time[d.time.length - 1] : -1]",
        label)
    return int(n), float(t)


def updates(driver: Any) -> int:
    return int(re.search(r"id='updates'>(\d+)<", str(model(driver, "info", "text")))[1])


def element(driver: Any, name: str, selector: str) -> Any:
    """The element ``selector`` in the shadow DOM of the widget named ``name``."""
    found = driver.execute_script("const v = (function(){" + FIND_VIEW + "})"
                                  ".apply(null, arguments); return v === null ? null : "
                                  "v.shadow_el.querySelector(arguments[1])", name, selector)
    assert found is not None, f"no {selector} in a widget named {name!r} on the page"
    return found


def drag_slider(driver: Any, name: str, pixels: int) -> float:
    """Drag the handle of slider ``name`` by ``pixels``; its value in the browser after."""
    from selenium.webdriver.common.action_chains import ActionChains

    handle = element(driver, name, ".noUi-handle")
    ActionChains(driver).drag_and_drop_by_offset(handle, pixels, 0).perform()
    return float(model(driver, name, "value"))


def type_into(driver: Any, name: str, text: str) -> None:
    """Type ``text`` and Enter into the number field ``name``."""
    from selenium.webdriver.common.keys import Keys

    field = element(driver, name, "input")
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(text, Keys.ENTER)


def screenshot(driver: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(path)), f"no screenshot written to {path}"
