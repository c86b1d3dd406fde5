"""A client message of several parts is one message of the job.

Clients split a turn into parts for their own reasons (Kilo and OpenCode
append an `<environment_details>` part to every prompt, Claude Code puts its
reminders in a block before it, Gemini CLI its session context): the model
should read one turn, as the client meant it, and a chat template that wants
the roles to alternate should see one user message. So the texts are joined
in order, with a line break between two parts unless one already has a
space or a break there (" part two" continues "part one"), and each image keeps its place as an offset into the text
(`Image.at`); an upstream that takes parts gets them back in that order.
"""
from __future__ import annotations

from protocol.contract import Image, Message


def joined(parts: list[str | Image]) -> tuple[str, list[Image]]:
    """Texts and images in their order: the one text, and the images placed in it."""
    text, images = "", []
    for part in parts:
        if isinstance(part, Image):
            images.append(part.model_copy(update={"at": len(text)}))
        elif part:
            text += "\n" + part if text and not text[-1].isspace() and not part[0].isspace() else part
    return text, images


def interleaved(message: Message) -> list[str | Image]:
    """A message's text cut where its images stood, the images between."""
    content, pieces, cut = message.content, [], 0
    for image in sorted(message.images, key=lambda i: len(content) if i.at is None else i.at):
        at = len(content) if image.at is None else min(image.at, len(content))
        if content[cut:at]:
            pieces.append(content[cut:at])
        pieces.append(image)
        cut = max(cut, at)
    if content[cut:] or not pieces:
        pieces.append(content[cut:])
    return pieces
