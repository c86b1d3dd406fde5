"""System-prompt injection, for backends that ignore the system role.

On a new conversation (no assistant message yet) every system message is
removed and prepended to the first user message inside `<system_context>`
(`<agent_system_context>` if the user text already has a `<system_context>`),
with the agent's instructions first. Later turns are left as they are: such
backends keep what the first turn told them.
"""
from __future__ import annotations

from protocol.contract import Message


def _context_block(tag: str, agent_instructions: str, systems: list[str]) -> str:
    sections = []
    if agent_instructions:
        sections.append(f"=== Agent Instructions ===\n{agent_instructions}")
    sections += [f"=== System Context {n} ===\n{text}" for n, text in enumerate(systems, start=1)]
    return f"<{tag}>\n" + "\n\n".join(sections) + f"\n</{tag}>"


def inject_system(messages: list[Message], agent_instructions: str = "") -> list[Message]:
    if any(m.role == "assistant" for m in messages):
        return messages
    systems = [m.content for m in messages if m.role == "system"]
    if not systems and not agent_instructions:
        return messages
    rest = [m for m in messages if m.role != "system"]
    first_user = next((i for i, m in enumerate(rest) if m.role == "user"), None)
    if first_user is None:
        rest.insert(0, Message(role="user", content=""))
        first_user = 0
    user = rest[first_user]
    tag = "agent_system_context" if "<system_context>" in user.content else "system_context"
    block = _context_block(tag, agent_instructions, systems)
    rest[first_user] = user.model_copy(update={"content": f"{block}\n\n{user.content}" if user.content else block})
    return rest
