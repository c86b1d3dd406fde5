"""A GBNF grammar that forces an emulated tool call: for backends that
constrain their output (llama.cpp), `tool_choice: "required"` (or a named
function) becomes a guarantee, not a request. The grammar admits exactly the
`<invoke>` blocks the parser reads (one, or several when parallel calls are
allowed), naming only the offered tools."""
from __future__ import annotations

import json

from protocol.contract import ToolSpec


def _literal(text: str) -> str:
    return json.dumps(text)  # a GBNF string literal: the same escapes as JSON for our names


def forced_call_grammar(tools: list[ToolSpec], parallel: bool) -> str:
    names = " | ".join(_literal(t.name) for t in tools)
    more = ' ("\\n" call)*' if parallel else ""
    return "\n".join([
        f"root ::= call{more}",
        'call ::= "<invoke name=\\"" name "\\">\\n" param* "</invoke>"',
        f"name ::= {names}",
        'param ::= "<parameter name=\\"" pname "\\">" value "</parameter>\\n"',
        "pname ::= [A-Za-z0-9_.:-]+",
        'value ::= ([^<] | "<" [^/])*',
    ])
