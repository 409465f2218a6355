"""What ``/metrics`` reports, in Prometheus' text format (version 0.0.4).

The process counts as it goes: every handled message (by outcome, with the time from its
claim to its end in a histogram) and every model error (by model key). Gauges are read when
scraped (the flush queue's depth from the ledger, each account's sync age), by the caller of
:func:`render`. No client library: the format is a few lines of text.

One process, one :data:`METRICS`; counters start at zero with the process, as Prometheus
expects (it handles the reset).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# seconds: a reply streams within a second or two, a tool-using turn takes tens of seconds
REPLY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@dataclass
class Metrics:
    """The counters of one process (thread-safe: model turns finish in worker threads too)."""

    replies: dict[str, int] = field(default_factory=dict)  # outcome -> messages
    reply_buckets: list[int] = field(default_factory=lambda: [0] * len(REPLY_BUCKETS))
    reply_sum: float = 0.0
    reply_count: int = 0
    model_errors: dict[str, int] = field(default_factory=dict)  # model key -> errors
    leases_held: int = 0  # accounts this process runs (several processes on one database)
    lease_moves: dict[str, int] = field(default_factory=dict)  # "taken"/"lost" -> leases
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reply(self, outcome: str, seconds: float) -> None:
        """A message was handled (``done``, ``failed``): how, and how long it took."""
        with self._lock:
            self.replies[outcome] = self.replies.get(outcome, 0) + 1
            for i, bound in enumerate(REPLY_BUCKETS):
                if seconds <= bound:
                    self.reply_buckets[i] += 1
            self.reply_sum += seconds
            self.reply_count += 1

    def model_error(self, model: str) -> None:
        with self._lock:
            self.model_errors[model] = self.model_errors.get(model, 0) + 1

    def set_leases(self, held: int) -> None:
        with self._lock:
            self.leases_held = held

    def lease_moved(self, how: str) -> None:
        """A lease this process ``taken`` from a silent process, or ``lost`` to another."""
        with self._lock:
            self.lease_moves[how] = self.lease_moves.get(how, 0) + 1

    def render(self, gauges: Iterable[Gauge] = ()) -> str:
        """The exposition text: the counters, then ``gauges``."""
        with self._lock:
            lines = [
                "# HELP mindroom_replies_total Messages handled, by outcome.",
                "# TYPE mindroom_replies_total counter",
                *(
                    f'mindroom_replies_total{{outcome="{_label(k)}"}} {v}'
                    for k, v in sorted(self.replies.items())
                ),
                "# HELP mindroom_reply_seconds From a message's claim to the end of its answers.",
                "# TYPE mindroom_reply_seconds histogram",
                *(
                    f'mindroom_reply_seconds_bucket{{le="{bound}"}} {count}'
                    for bound, count in zip(REPLY_BUCKETS, self.reply_buckets, strict=True)
                ),
                f'mindroom_reply_seconds_bucket{{le="+Inf"}} {self.reply_count}',
                f"mindroom_reply_seconds_sum {self.reply_sum:.6f}",
                f"mindroom_reply_seconds_count {self.reply_count}",
                "# HELP mindroom_model_errors_total Model calls that failed, by model key.",
                "# TYPE mindroom_model_errors_total counter",
                *(
                    f'mindroom_model_errors_total{{model="{_label(k)}"}} {v}'
                    for k, v in sorted(self.model_errors.items())
                ),
                "# HELP mindroom_leases_held Accounts this process runs by lease.",
                "# TYPE mindroom_leases_held gauge",
                f"mindroom_leases_held {self.leases_held}",
                "# HELP mindroom_lease_moves_total Leases taken over or lost by this process.",
                "# TYPE mindroom_lease_moves_total counter",
                *(
                    f'mindroom_lease_moves_total{{how="{_label(k)}"}} {v}'
                    for k, v in sorted(self.lease_moves.items())
                ),
            ]
        for gauge in gauges:
            lines += [f"# HELP {gauge.name} {gauge.help}", f"# TYPE {gauge.name} gauge"]
            for labels, value in gauge.values:
                inner = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
                lines.append(
                    f"{gauge.name}{{{inner}}} {value}" if inner else f"{gauge.name} {value}"
                )
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Gauge:
    """A value read at scrape time: ``values`` is (labels, value) pairs."""

    name: str
    help: str
    values: Sequence[tuple[Mapping[str, str], float]]


METRICS = Metrics()
"""This process's counters."""
