"""Prometheus exposition of the cluster-wide metrics kept in Redis
(protocol/metrics.py), read at scrape time. Active streams are the job
channels someone is subscribed to: Redis knows that exactly, with nothing
left behind by a process that died."""
from __future__ import annotations

from typing import Callable

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from app.services import Services
from protocol.keys import REJECTED, TOKENS, events_channel_pattern
from protocol.metrics import TTFT_BUCKETS, jobs_finished, ttft_histogram
from protocol.queue import completion_queue


class ClusterCollector:
    def __init__(self, services: Services, visible: Callable[[str], bool]):
        self._services = services
        self._visible = visible

    def collect(self):
        redis, registry = self._services.redis, self._services.registry
        jobs = CounterMetricFamily("switchboard_jobs_finished", "Jobs finished, by model and reason.",
                                   labels=["model", "reason"])
        for (model, reason), value in jobs_finished(redis).items():
            if self._visible(model):
                jobs.add_metric([model, reason], value)
        yield jobs
        tokens = {model: count for model, count in redis.hgetall(TOKENS).items() if self._visible(model.decode())}
        yield _counter_by("switchboard_tokens_generated", "Tokens generated, by model.", "model", tokens)
        yield _counter_by("switchboard_rejected", "Requests turned away, by reason.", "reason",
                          redis.hgetall(REJECTED))
        depth = GaugeMetricFamily("switchboard_queue_depth", "Jobs waiting, by pool.", labels=["pool"])
        for pool in sorted(registry.pools()):
            depth.add_metric([pool], redis.llen(pool) + redis.llen(completion_queue(pool)))
        yield depth
        yield GaugeMetricFamily("switchboard_active_streams", "Requests waiting on a job's events.",
                                value=len(redis.pubsub_channels(events_channel_pattern())))
        yield self._ttft(redis, [name for name in registry.names() if self._visible(name)])

    @staticmethod
    def _ttft(redis, models):
        family = HistogramMetricFamily("switchboard_time_to_first_token_seconds",
                                       "From enqueueing to the first token, by model.", labels=["model"])
        for model in models:
            raw = ttft_histogram(redis, model)
            if raw:
                buckets = [(repr(b), raw.get(repr(b), 0.0)) for b in TTFT_BUCKETS] + [("+Inf", raw.get("+Inf", 0.0))]
                family.add_metric([model], buckets, sum_value=raw.get("sum", 0.0))
        return family


def _counter_by(name: str, doc: str, label: str, values: dict) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key.decode()], int(value))
    return family


def cluster_registry(services: Services, visible: Callable[[str], bool]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(services, visible))
    return registry
