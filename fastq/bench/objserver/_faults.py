"""The test server's faults (:class:`Faults`) and limits."""
import dataclasses

MAX_STALL_S = 60.0        # a stall never lasts longer (and ends at once when the server stops)
IDLE_TIMEOUT_S = 60.0     # an idle keep-alive connection is closed after this
JOIN_TIMEOUT_S = 5.0      # stop() waits at most this long for each connection thread
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
FAULT_KINDS = ("slowdown", "error", "reset", "truncate", "stall")


@dataclasses.dataclass(frozen=True)
class Faults:
    """What the server does wrong, and how often.

    latency_ms     added before every request is answered (every kind of request)
    slowdown_rate  fraction of eligible requests answered 503 SlowDown (S3 XML)
    error_rate     fraction answered 500 InternalError
    reset_rate     fraction cut with an RST after the headers and half the body
    truncate_rate  fraction sent with the full Content-Length but half the body, then closed
    stall_rate     fraction that send their headers, then nothing for stall_s seconds
    stall_s        length of a stall (at most MAX_STALL_S)
    dead           refuse connections (the listening socket is closed)
    ops            the request kinds the rates apply to: "get", "head", "list", "put", "delete"
                   (truncate and stall need a body: they leave HEAD and bodiless answers alone)
    """
    latency_ms: float = 0.0
    slowdown_rate: float = 0.0
    error_rate: float = 0.0
    reset_rate: float = 0.0
    truncate_rate: float = 0.0
    stall_rate: float = 0.0
    stall_s: float = 5.0
    dead: bool = False
    ops: tuple = ("get",)

    def __post_init__(self):
        if not 0 <= self.latency_ms <= 60_000:
            raise ValueError(f"Faults: latency_ms must be in [0, 60000], got {self.latency_ms!r}")
        rates = [getattr(self, k + "_rate") for k in FAULT_KINDS]
        for k, r in zip(FAULT_KINDS, rates):
            if not 0 <= r <= 1:
                raise ValueError(f"Faults: {k}_rate must be in [0, 1], got {r!r}")
        if sum(rates) > 1 + 1e-9:
            raise ValueError(f"Faults: the rates add up to {sum(rates):g} > 1")
        if not 0 <= self.stall_s <= MAX_STALL_S:
            raise ValueError(f"Faults: stall_s must be in [0, {MAX_STALL_S:g}], got {self.stall_s!r}")
        ops = (self.ops,) if isinstance(self.ops, str) else tuple(self.ops)
        bad = set(ops) - {"get", "head", "list", "put", "delete"}
        if bad:
            raise ValueError(f"Faults: unknown ops {sorted(bad)}; choose from get, head, list, put, delete")
        object.__setattr__(self, "ops", ops)

    @classmethod
    def coerce(cls, faults):
        if faults is None:
            return cls()
        if isinstance(faults, cls):
            return faults
        if isinstance(faults, dict):
            unknown = set(faults) - {f.name for f in dataclasses.fields(cls)}
            if unknown:
                raise ValueError(f"Faults: unknown fields {sorted(unknown)}")
            return cls(**faults)
        raise TypeError(f"faults must be a Faults, a dict or None, got {type(faults).__name__}")

    def pick(self, u):
        """The fault for a uniform draw u in [0, 1), or None."""
        acc = 0.0
        for k in FAULT_KINDS:
            acc += getattr(self, k + "_rate")
            if u < acc:
                return k
        return None


