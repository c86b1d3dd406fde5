"""Property 1: a redirect after sign-in stays on Switchboard. Whatever
`next` a link carries (encoded tabs and newlines browsers drop, slashes and
backslashes they read as another origin, whole URLs), the callback sends
the browser to one of Switchboard's own pages, never elsewhere and never
with a 5xx, and chromium, which decides what a Location means, ends on
Switchboard."""
from __future__ import annotations

from urllib.parse import quote, urljoin, urlsplit

import httpx
import pytest
from selenium.webdriver.common.by import By

from tests.integration.waits import wait_until
from tests.security.office import sign_in_answer

HOSTILE = {
    "tab": "/\t/evil.example", "newline": "/\n/evil.example", "carriage return": "/\r\n/evil.example",
    "two slashes": "//evil.example", "backslash": "/\\evil.example", "backslash first": "\\/evil.example",
    "whole url": "https://evil.example/", "scheme relative with tab": "/\t\t//evil.example",
    "space": "/ /evil.example", "userinfo": "/@evil.example", "dots": "/..//evil.example",
    "not a page": "/v1/chat/completions", "javascript": "javascript:alert(1)", "nul": "/\x00/evil.example",
}


def landed(base: str, location: str) -> str:
    """Where a browser goes for this Location: browsers drop tabs and newlines and read `\\` as `/`."""
    cleaned = location.replace("\t", "").replace("\n", "").replace("\r", "").replace("\\", "/")
    return urljoin(base + "/", cleaned)


@pytest.mark.parametrize("next_page", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_callback_never_sends_a_browser_elsewhere(office, next_page):
    base = office["front"]
    answer = sign_in_answer(base, "bob", f"/login?next={quote(next_page, safe='')}")
    assert answer.status_code == 302, answer.text[:300]
    where = urlsplit(landed(base, answer.headers["location"]))
    assert (where.scheme, where.netloc) == ("http", urlsplit(base).netloc)
    assert where.path in ("/me", "/admin")


@pytest.mark.parametrize("next_page", ["/admin/requests?model=echo", "/login/device?user_code=BCDF-GHJK", "/me"])
def test_a_page_of_switchboards_own_is_kept(office, next_page):
    answer = sign_in_answer(office["front"], "bob", f"/login?next={quote(next_page, safe='')}")
    assert answer.status_code == 302 and answer.headers["location"] == next_page


def test_chromium_ends_on_switchboard(office, browser):
    base = office["front"]
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
    browser.get(f"{base}/login?next=/%09/evil.example")
    wait_until(lambda: browser.find_elements(By.NAME, "login"), what="the provider's login form")
    browser.find_element(By.NAME, "login").send_keys("bob")
    browser.find_element(By.NAME, "password").send_keys("any")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(lambda: urlsplit(browser.current_url).path not in ("/login", "/login/callback", "")
               and "/interaction/" not in browser.current_url, what="the sign-in's end")
    assert browser.current_url.startswith(base + "/me"), browser.current_url


def test_a_bad_next_on_login_itself_never_fails(office):
    for next_page in HOSTILE.values():
        answer = httpx.get(f"{office['front']}/login", params={"next": next_page})
        assert answer.status_code == 302 and answer.headers["location"].startswith(office["issuer"])
