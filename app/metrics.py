"""Prometheus exposition of the cluster-wide metrics kept in Redis
(telemetry/metrics.py), read at scrape time. Active streams are what the live
web processes' leases say they relay (renewed every second; a process that
died stops counting when its lease lapses)."""
from __future__ import annotations

from typing import Callable

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from app.console import deployment_states
from app.services import Services
from protocol.keys import REJECTED, TOKENS, tool_seconds_key
from protocol.presence import streams_relayed
from telemetry.metrics import (
    TOOL_SECONDS_BUCKETS, TTFT_BUCKETS, guard_findings, histogram, jobs_finished, prompt_cache_counts, tool_calls,
    ttft_histogram,
)
import jobqueue
from ledger import usage


class ClusterCollector:
    def __init__(self, services: Services, visible: Callable[[str], bool], people: bool,
                 tools: Callable[[str, str], bool]):
        self._services = services
        self._visible, self._tools = visible, tools  # the models, and the MCP servers' tools, it may see
        self._people = people  # may name people (an admin key, or keys off)

    def collect(self):
        redis, registry = self._services.redis, self._services.registry
        yield self._by_model("switchboard_jobs_finished", "Jobs finished, by model and reason.", "reason",
                             jobs_finished(redis))
        tokens = {model: count for model, count in redis.hgetall(TOKENS).items() if self._visible(model.decode())}
        yield _counter_by("switchboard_tokens_generated", "Tokens generated, by model.", "model", tokens)
        yield _counter_by("switchboard_rejected", "Requests turned away, by reason.", "reason",
                          redis.hgetall(REJECTED))
        yield from _queues(redis, sorted(registry.pools()), self._people)
        yield from self._prompt_cache(redis)
        yield GaugeMetricFamily("switchboard_active_streams", "Requests waiting on a job's events.",
                                value=streams_relayed(redis))
        yield self._ttft(redis, [name for name in registry.names() if self._visible(name)])
        yield from _tool_calls(redis, self._tools)
        yield _guard_findings(redis)
        yield from _deployments([d for d in deployment_states(redis, registry) if self._visible(d.model)])
        if self._people:
            yield _usage_today(redis)

    def _prompt_cache(self, redis):
        lookups, tokens = prompt_cache_counts(redis)
        return (self._by_model("switchboard_prompt_cache_lookups", "Local models' prompt-cache lookups, by model "
                               "and result (hit: part of the prompt was already evaluated).", "result", lookups),
                self._by_model("switchboard_prompt_tokens", "Local models' prompt tokens, by model and whether "
                               "they were reused from the cache or evaluated.", "source", tokens))

    def _by_model(self, name: str, doc: str, label: str, values: dict) -> CounterMetricFamily:
        """A counter of (model, label) pairs, for the models this key may see."""
        family = CounterMetricFamily(name, doc, labels=["model", label])
        for (model, value_label), value in sorted(values.items()):
            if self._visible(model):
                family.add_metric([model, value_label], value)
        return family

    @staticmethod
    def _ttft(redis, models):
        family = HistogramMetricFamily("switchboard_time_to_first_token_seconds",
                                       "From enqueueing to the first token, by model.", labels=["model"])
        for model in models:
            _add_histogram(family, [model], ttft_histogram(redis, model), TTFT_BUCKETS)
        return family


def _add_histogram(family: HistogramMetricFamily, labels: list[str], raw: dict, bounds: tuple) -> None:
    if raw:
        buckets = [(repr(b), raw.get(repr(b), 0.0)) for b in bounds] + [("+Inf", raw.get("+Inf", 0.0))]
        family.add_metric(labels, buckets, sum_value=raw.get("sum", 0.0))


def _tool_calls(redis, visible: Callable[[str, str], bool]):
    """MCP tool calls, server-side and through the gateway (/mcp): the
    registry's servers and their tools, so the labels stay few (a gateway
    call no server ran is counted under tool "-")."""
    counts = {labels: value for labels, value in tool_calls(redis).items() if visible(labels[0], labels[1])}
    calls = CounterMetricFamily("switchboard_tool_calls", "MCP tool calls (server-side and through /mcp), by "
                                "server, tool and outcome (ok, error, timeout; the gateway's also unavailable, "
                                "denied, refused, unknown).", labels=["server", "tool", "outcome"])
    for labels, value in sorted(counts.items()):
        calls.add_metric(list(labels), value)
    seconds = HistogramMetricFamily("switchboard_tool_call_seconds", "MCP tool calls' duration, by "
                                    "server and tool.", labels=["server", "tool"])
    for server, tool in sorted({(server, tool) for server, tool, _ in counts}):
        observed = histogram(redis, tool_seconds_key(server, tool), TOOL_SECONDS_BUCKETS)
        _add_histogram(seconds, [server, tool], observed, TOOL_SECONDS_BUCKETS)
    return calls, seconds


def _guard_findings(redis) -> CounterMetricFamily:
    family = CounterMetricFamily("switchboard_guard_findings", "Secrets the guard found in what went to models, by "
                                 "kind and action (logged, redacted, blocked): each secret once, when first found; "
                                 "each refused request's.", labels=["kind", "action"])
    for labels, value in sorted(guard_findings(redis).items()):
        family.add_metric(list(labels), value)
    return family


def _deployments(states: list):
    """Each routed upstream model's deployments (catalog/deployments.py)."""
    labels = ["model", "deployment"]
    in_flight = GaugeMetricFamily("switchboard_deployment_in_flight", "Requests a deployment serves now.",
                                  labels=labels)
    waiting = GaugeMetricFamily("switchboard_deployment_waiting", "Agent sessions' turns waiting for a place on a "
                                "full deployment that holds their conversation.", labels=labels)
    ready = GaugeMetricFamily("switchboard_deployment_ready", "1 if a deployment takes requests; 0 while it rests "
                              "after a failure or waits for its probe.", labels=labels)
    rest = GaugeMetricFamily("switchboard_deployment_cooldown_seconds", "What is left of a deployment's rest.",
                             labels=labels)
    counters = {metric: CounterMetricFamily(f"switchboard_deployment_{metric}", doc, labels=labels) for metric, doc in (
        ("requests", "Requests sent to a deployment."), ("failures", "Requests a deployment failed before their "
         "first token (each went on to another)."), ("cooldowns", "Times a deployment was put to rest."))}
    ttft = HistogramMetricFamily("switchboard_deployment_time_to_first_token_seconds", "From sending a request to "
                                 "a deployment to its first token.", labels=labels)
    for d in states:
        in_flight.add_metric([d.model, d.name], d.in_flight)
        waiting.add_metric([d.model, d.name], d.waiting)
        ready.add_metric([d.model, d.name], 1 if d.state == "ready" else 0)
        rest.add_metric([d.model, d.name], d.rest_seconds)
        for metric, family in counters.items():
            family.add_metric([d.model, d.name], getattr(d, metric))
        _add_histogram(ttft, [d.model, d.name], d.ttft, TTFT_BUCKETS)
    return in_flight, waiting, ready, rest, *counters.values(), ttft


# Per-person waiting counts name at most this many people per pool (those
# with the most jobs waiting); the rest are summed as "other".
PEOPLE_SHOWN = 10


def _top_people(counts: dict[str, int]) -> list[tuple[str, int]]:
    """The PEOPLE_SHOWN with the highest counts, then "other" for the rest."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    shown = ranked[:PEOPLE_SHOWN]
    if len(ranked) > PEOPLE_SHOWN:
        shown.append(("other", sum(count for _, count in ranked[PEOPLE_SHOWN:])))
    return shown


def _queues(redis, pools: list[str], people_shown: bool = True):
    depth = GaugeMetricFamily("switchboard_queue_depth", "Jobs waiting, by pool.", labels=["pool"])
    people = GaugeMetricFamily("switchboard_queue_waiting", "Jobs waiting, by pool and person "
                               f"(the {PEOPLE_SHOWN} with most waiting; the rest as other).", labels=["pool", "person"])
    for pool in pools:
        waiting, by_person = jobqueue.queue_depth(redis, pool)
        depth.add_metric([pool], waiting)
        for person, count in _top_people(by_person) if people_shown else []:
            people.add_metric([pool, person], count)
    return depth, people


def _usage_today(redis):
    """Today's tokens per person (UTC day; the top ones, the rest as other)."""
    family = GaugeMetricFamily("switchboard_usage_today_tokens", f"Prompt and completion tokens today (UTC) by "
                               f"person (the {PEOPLE_SHOWN} who used most; the rest as other).",
                               labels=["person", "kind"])
    totals = usage.totals_by_person(usage.usage(redis))
    for kind in ("prompt_tokens", "completion_tokens"):
        for person, count in _top_people({p: t[kind] for p, t in totals.items()}):
            family.add_metric([person, kind], count)
    return family


def _counter_by(name: str, doc: str, label: str, values: dict) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key.decode()], int(value))
    return family


def cluster_registry(services: Services, visible: Callable[[str], bool], people: bool = True,
                     tools: Callable[[str, str], bool] = lambda server, tool: True) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(services, visible, people, tools))
    return registry
