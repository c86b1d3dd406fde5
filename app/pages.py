"""The few pages sign-in shows a person's browser itself: a message (signed
out, a refusal naming its reason) and the approval of a command-line login.
Flask's templates escape what they are given; no script, nothing from the
network. (The console's and the self-service page's own pages are HTML
files beside this one, with their data fetched as JSON.)"""
from __future__ import annotations

from pathlib import Path

from flask import Response, render_template_string

_FILES = Path(__file__).resolve().parent
_HEAD = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{{ title }} · Switchboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}code{font-size:1.2rem;letter-spacing:.1em}button{font:inherit;padding:.3rem .9rem}
.why{background:#fff4f2;border-left:3px solid #c33;padding:.5rem .8rem}</style></head><body>"""

MESSAGE = _HEAD + """<h1 id="title">{{ title }}</h1>
<p id="message" class="{{ 'why' if refusal else '' }}">{{ text }}</p>
{% for label, href in links %}<p><a href="{{ href }}">{{ label }}</a></p>{% endfor %}</body></html>"""

DEVICE = _HEAD + """<h1 id="title">Sign in a command-line tool</h1>
<p>Signed in as <strong id="person">{{ person }}</strong>.</p>
{% if waiting %}
<p>A tool ({{ waiting.label or "command line" }}) asks to act as you with the code
<code id="user-code">{{ user_code }}</code>. Approve it only if you started it and it shows this code.</p>
<form method="post" action="/login/device"><input type="hidden" name="user_code" value="{{ user_code }}">
<button id="approve" name="decision" value="approve">Approve</button>
<button id="deny" name="decision" value="deny">Deny</button></form>
{% else %}
{% if user_code %}<p class="why" id="message">No login waits with the code {{ user_code }} (it expired or was
answered already): run the login again.</p>{% endif %}
<form method="get" action="/login/device"><label>The code your tool shows:
<input id="code" name="user_code" autocomplete="off" autofocus></label> <button id="continue">Continue</button></form>
{% endif %}</body></html>"""


CONSENT = _HEAD + """<h1 id="title">Let an agent use the MCP gateway as you</h1>
<p>Signed in as <strong id="person">{{ person }}</strong>.</p>
<p>An agent calling itself <strong id="client">{{ ask.client_name }}</strong> asks to call this server's MCP tools
({{ ask.resource }}) as you, with your rights and on your rates, until you revoke it on your page.
It will be sent back to <code id="redirect">{{ host }}</code>.
Approve it only if you just added this server to an agent.</p>
<form method="post" action="/oauth/authorize"><input type="hidden" name="ask" value="{{ ask_id }}">
<button id="approve" name="decision" value="approve">Approve</button>
<button id="deny" name="decision" value="deny">Deny</button></form></body></html>"""


def consent(person: str, ask, ask_id: str, host: str) -> Response:
    return Response(render_template_string(CONSENT, title="An agent asks", person=person, ask=ask, ask_id=ask_id,
                                           host=host),
                    content_type="text/html; charset=utf-8", headers={"Cache-Control": "no-store",
                                                                      "X-Frame-Options": "DENY"})


def message(title: str, text: str, status: int = 200, links: tuple[tuple[str, str], ...] = ()) -> Response:
    body = render_template_string(MESSAGE, title=title, text=text, links=links, refusal=status >= 400)
    return Response(body, status=status, content_type="text/html; charset=utf-8", headers={"Cache-Control": "no-store"})


def device(person: str, user_code: str, waiting: dict | None) -> Response:
    return Response(render_template_string(DEVICE, title="Command-line sign-in", person=person, user_code=user_code,
                                           waiting=waiting),
                    content_type="text/html; charset=utf-8", headers={"Cache-Control": "no-store"})


def static(name: str) -> Response:
    return Response((_FILES / name).read_text(encoding="utf-8"), content_type="text/html; charset=utf-8",
                    headers={"Cache-Control": "no-store"})
