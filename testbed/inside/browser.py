"""An approver in a real browser: Debian's chromium, headless, driven by Selenium through
Debian's chromedriver (nothing downloaded), run inside the container:

    python browser.py URL --screenshot PNG [--code CODE] [--reason TEXT]

Opens the link from the notification and saves a screenshot of the plan page; with
``--code``, types the code (and the reason) into the page's form and presses its button,
as a person would, and waits for the answer page. Prints one JSON object: ``plan`` (the
visible text of the page the link opened), ``title``, and with a code ``answer`` (the
visible text of the page after the click).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT = 20


def browser(profile: str) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",  # root in a container: chromium's own sandbox cannot start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1000,1400",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--screenshot", required=True)
    p.add_argument("--code")
    p.add_argument("--confirm", default="")
    p.add_argument("--reason", default="")
    args = p.parse_args()
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager download
    said: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as profile:
        driver = browser(profile)
        try:
            driver.get(args.url)
            body = WebDriverWait(driver, WAIT).until(
                expected_conditions.presence_of_element_located((By.TAG_NAME, "body"))
            )
            said["title"] = driver.title
            said["plan"] = body.text
            driver.save_screenshot(args.screenshot)
            if args.code is not None:
                driver.find_element(By.NAME, "confirm").send_keys(args.confirm)
                driver.find_element(By.NAME, "code").send_keys(args.code)
                if args.reason:
                    driver.find_element(By.NAME, "reason").send_keys(args.reason)
                button = driver.find_element(By.CSS_SELECTOR, "form button, form [type=submit]")
                button.click()
                WebDriverWait(driver, WAIT).until(expected_conditions.staleness_of(body))
                said["answer"] = driver.find_element(By.TAG_NAME, "body").text
        finally:
            driver.quit()
    json.dump(said, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
