"""Debian's chromium, headless, driven by Selenium with the system driver:
for the pages an operator opens (the console)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def chromium(profile: Path) -> webdriver.Chrome:
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        raise RuntimeError("Debian's chromium and chromium-driver are needed: `make install-dev` installs them")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-quic", f"--user-data-dir={profile}", "--window-size=1440,1000"):
        options.add_argument(argument)
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager downloads nothing
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def text_of(driver, selector: str) -> str:
    return driver.find_element(By.CSS_SELECTOR, selector).text
