"""What ``/metrics`` reports, in Prometheus' text format (version 0.0.4), by ``prometheus_client``.

The process counts as it goes: every handled message (by outcome, with the time from its
claim to its end in a histogram) and every model error (by model key). Gauges are read when
scraped (the flush queue's depth from the ledger, each account's sync age), by the caller of
:func:`Metrics.render`.

One process, one :data:`METRICS`, with a registry of its own (never the library's global one,
which other libraries in the process may fill); counters start at zero with the process, as
Prometheus expects (it handles the reset).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import Gauge as PrometheusGauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# seconds: a reply streams within a second or two, a tool-using turn takes tens of seconds
REPLY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    """The counters of one process (thread-safe: model turns finish in worker threads too)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._replies = Counter(
            "mindroom_replies",
            "Messages handled, by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self._reply_seconds = Histogram(
            "mindroom_reply_seconds",
            "From a message's claim to the end of its answers.",
            buckets=REPLY_BUCKETS,
            registry=self.registry,
        )
        self._model_errors = Counter(
            "mindroom_model_errors",
            "Model calls that failed, by model key.",
            ["model"],
            registry=self.registry,
        )
        # accounts this process runs (several processes on one database)
        self._leases_held = PrometheusGauge(
            "mindroom_leases_held", "Accounts this process runs by lease.", registry=self.registry
        )
        self._lease_moves = Counter(
            "mindroom_lease_moves",
            "Leases taken over or lost by this process.",
            ["how"],
            registry=self.registry,
        )

    def reply(self, outcome: str, seconds: float) -> None:
        """A message was handled (``done``, ``failed``): how, and how long it took."""
        self._replies.labels(outcome=outcome).inc()
        self._reply_seconds.observe(seconds)

    def model_error(self, model: str) -> None:
        self._model_errors.labels(model=model).inc()

    def set_leases(self, held: int) -> None:
        self._leases_held.set(held)

    def lease_moved(self, how: str) -> None:
        """A lease this process ``taken`` from a silent process, or ``lost`` to another."""
        self._lease_moves.labels(how=how).inc()

    def render(self, gauges: Iterable[Gauge] = ()) -> str:
        """The exposition text: the counters, then ``gauges``."""
        scrape = CollectorRegistry()
        scrape.register(_ReadNow(tuple(gauges)))
        return (generate_latest(_WithoutCreated(self.registry)) + generate_latest(scrape)).decode()


@dataclass(frozen=True)
class Gauge:
    """A value read at scrape time: ``values`` is (labels, value) pairs (the same label names
    in each)."""

    name: str
    help: str
    values: Sequence[tuple[Mapping[str, str], float]]


class _ReadNow(Collector):
    """The gauges of one scrape."""

    def __init__(self, gauges: Sequence[Gauge]) -> None:
        self.gauges = gauges

    def collect(self) -> Iterator[Metric]:
        for gauge in self.gauges:
            names = list(gauge.values[0][0]) if gauge.values else []
            family = GaugeMetricFamily(gauge.name, gauge.help, labels=names)
            for labels, value in gauge.values:
                family.add_metric([labels[n] for n in names], value)
            yield family


class _WithoutCreated(Collector):
    """``registry`` without the ``*_created`` samples the library adds to counters and
    histograms: the text format shows them as extra series, which ``/metrics`` never had."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric


METRICS = Metrics()
"""This process's counters."""
