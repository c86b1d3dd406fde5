"""Completion jobs into model input, per model.

- raw: the prompt, byte for byte
- a suffix: the model family's fill-in-the-middle template and its stops
- a request-level template: rendered with the prompt, system and suffix
- otherwise: a chat (system + user) for the model's own chat template

The first three become raw text, so every backend only ever sees raw text or
chat messages.
"""
from __future__ import annotations

from catalog import gotemplate
from protocol.contract import Job, Message, PromptSpec
from protocol.errors import BackendError
from catalog.fim import FAMILIES


def resolve_prompt(job: Job, fim_family: str | None, family_stops: bool = True) -> Job:
    """`family_stops`: add the FIM family's stop strings (not for echo, whose
    reply is the prompt itself)."""
    spec = job.prompt
    if spec is not None and spec.images and (spec.raw or spec.suffix or spec.template is not None):
        raise BackendError("images need a chat prompt (not raw, a suffix or a template)", 400)
    if spec is None or spec.raw:
        return job
    if spec.suffix:
        if fim_family is None:
            raise BackendError(f'"{job.model}" does not support insert', 400)
        fim = FAMILIES[fim_family]
        resolved = _raw(job, fim.render(spec.prompt, spec.suffix))
        if family_stops:
            options = job.options.model_copy(update={"stop": job.options.stop + list(fim.stops)})
            resolved = resolved.model_copy(update={"options": options})
        return resolved
    if spec.template is not None:
        return _raw(job, gotemplate.render(spec.template, prompt=spec.prompt, system=spec.system or ""))
    messages = ([Message(role="system", content=spec.system)] if spec.system else []) + [
        Message(role="user", content=spec.prompt, images=spec.images)]
    return job.model_copy(update={"prompt": None, "messages": messages})


def _raw(job: Job, text: str) -> Job:
    return job.model_copy(update={"prompt": PromptSpec(prompt=text, raw=True)})


def is_load_only(job: Job) -> bool:
    """An empty request only loads the model (Ollama's preload idiom)."""
    if job.embed is not None:
        return False
    if job.prompt is not None:
        return not job.prompt.prompt and not job.prompt.suffix
    return not job.messages
