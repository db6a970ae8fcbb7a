"""An approver in a real browser: Debian's chromium, headless, driven by Selenium through
Debian's chromedriver (nothing downloaded), run inside the container:

    python browser.py URL --screenshot PNG [--code CODE] [--confirm C] [--reason TEXT]
        [--phone] [--wrong-code CODE] [--follow SECONDS] [--again]

Opens the link from the notification and saves a screenshot of the plan page; with
``--code``, types the code (and the reason) into the page's form and presses its button,
as a person would, and waits for the answer page. Prints one JSON object: ``plan`` (the
visible text of the page the link opened), ``title``, and with a code ``answer`` (the
visible text of the page after the click).

With ``--phone`` the page is a phone's: a 390x844 viewport (CSS pixels, scale 1, a
mobile viewport), and ``rects`` holds, per page, where its parts are once it has settled
(``getBoundingClientRect()`` of #goal, #host, #units, #argv, #code, #message, #follow, #state:
top and bottom, with the viewport's size, ``scrollY`` and the focused element's id), its
``headline`` (the h1's text), ``broken`` (each word of a step's argv that the screen
splits over two lines) and ``confirm`` (the confirmation field's value, as shown).
``--wrong-code`` first sends that code, with the confirmation, and measures the page
that answers (``wrong``) before the right code goes in. ``--follow`` presses the answer
page's #follow link and waits up to SECONDS for the status view to settle (it stops
reloading): ``status`` is its text, ``state`` the state it shows. ``--again`` opens the
link once more at the end (``again``). Each later page's screenshot is PNG's name with
the page's name added (``plan-wrong.png``, ``plan-answer.png``, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT = 20
#: A phone's viewport in CSS pixels (a Pixel-sized Android phone's).
PHONE = (390, 844)
MEASURED = ("goal", "host", "units", "argv", "code", "message", "follow", "state")
#: Where each measured element is once the page has settled: two animation frames after
#: load, so that anything that scrolls the page on load (autofocus) has done so.
MEASURE = r"""
const done = arguments[arguments.length - 1];
requestAnimationFrame(() => requestAnimationFrame(() => {
  const out = {width: innerWidth, height: innerHeight, scrollY: scrollY,
               focused: document.activeElement ? document.activeElement.id : ""};
  for (const id of arguments[0]) {
    const found = document.getElementById(id);
    if (found) {
      const r = found.getBoundingClientRect();
      out[id] = {top: r.top, bottom: r.bottom};
    }
  }
  const h1 = document.querySelector("h1");
  out.headline = h1 ? h1.textContent : "";
  const confirm = document.getElementById("confirm");
  out.confirm = confirm ? confirm.value : null;
  out.broken = [];
  for (const pre of document.querySelectorAll("pre.argv")) {
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        if (tops.size > 1) out.broken.push(word[0]);
      }
    }
  }
  done(out);
}));
"""
ORIGIN = "return performance.timeOrigin"
LOADED = "return performance.timeOrigin !== arguments[0] && document.readyState === 'complete'"
#: Whether the status view has settled (it reloads itself only while the plan moves).
SETTLED = "return document.querySelector('meta[http-equiv=refresh]') === null"


def browser(profile: str, phone: bool) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    size = f"{PHONE[0]},{PHONE[1]}" if phone else "1000,1400"
    for flag in (
        "--headless=new",
        "--no-sandbox",  # root in a container: chromium's own sandbox cannot start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={size}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    if phone:
        width, height = PHONE
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True},
        )
    return driver


class Visit:
    """One browser session: each page it reaches is read, shot and (on a phone) measured."""

    def __init__(self, driver: webdriver.Chrome, shot: str, phone: bool) -> None:
        self.driver = driver
        self.shot = Path(shot)
        self.phone = phone
        self.said: dict[str, Any] = {}
        self.rects: dict[str, Any] = {}

    def body(self) -> WebElement:
        found: WebElement = WebDriverWait(self.driver, WAIT).until(
            expected_conditions.presence_of_element_located((By.TAG_NAME, "body"))
        )
        return found

    def record(self, name: str) -> None:
        """The page now shown, as ``name``: its text, screenshot and rects."""
        self.said[name] = self.body().text
        if self.phone:
            self.rects[name] = self.driver.execute_async_script(MEASURE, list(MEASURED))
        shot = self.shot if name == "plan" else self.shot.with_stem(f"{self.shot.stem}-{name}")
        self.driver.save_screenshot(str(shot))

    def submit(self, confirm: str, code: str, reason: str = "") -> None:
        """Type into the form, press its button, and wait for the page that answers (a
        new document: its time origin is not the form's)."""
        before = self.driver.execute_script(ORIGIN)
        field = self.driver.find_element(By.NAME, "confirm")
        if not field.get_attribute("value"):  # a person types it only where it is not
            field.send_keys(confirm)
        self.driver.find_element(By.NAME, "code").send_keys(code)
        if reason:
            self.driver.find_element(By.NAME, "reason").send_keys(reason)
        button = self.driver.find_element(By.CSS_SELECTOR, "form button, form [type=submit]")
        button.click()
        WebDriverWait(self.driver, WAIT).until(lambda driver: self.loaded_since(before))

    def loaded_since(self, origin: float) -> bool:
        try:
            return bool(self.driver.execute_script(LOADED, origin))
        except WebDriverException:
            return False  # between the form's unload and the answer's load

    def follow(self, seconds: float) -> None:
        """Press the answer page's #follow link; wait for the status view to settle."""
        link = self.driver.find_element(By.ID, "follow")
        self.said["follow_href"] = link.get_attribute("href")
        link.click()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if self.driver.find_elements(By.ID, "state") and self.driver.execute_script(
                    SETTLED
                ):
                    break
            except WebDriverException:
                pass  # between a reload's unload and its load
            time.sleep(1)
        self.record("status")
        states = self.driver.find_elements(By.ID, "state")
        self.said["state"] = states[0].text if states else ""


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--screenshot", required=True)
    p.add_argument("--code")
    p.add_argument("--confirm", default="")
    p.add_argument("--reason", default="")
    p.add_argument("--phone", action="store_true")
    p.add_argument("--wrong-code")
    p.add_argument("--follow", type=float, default=0.0)
    p.add_argument("--again", action="store_true")
    args = p.parse_args()
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager download
    with tempfile.TemporaryDirectory() as profile:
        driver = browser(profile, args.phone)
        visit = Visit(driver, args.screenshot, args.phone)
        try:
            driver.get(args.url)
            visit.record("plan")
            visit.said["title"] = driver.title
            if args.wrong_code is not None:
                visit.submit(args.confirm, args.wrong_code)
                visit.record("wrong")
            if args.code is not None:
                visit.submit(args.confirm, args.code, args.reason)
                visit.record("answer")
                if args.follow:
                    visit.follow(args.follow)
            if args.again:
                driver.get(args.url)
                visit.record("again")
        finally:
            driver.quit()
    if args.phone:
        visit.said["rects"] = visit.rects
    json.dump(visit.said, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
