"""The inspection that runs *inside* a Python kernel to list or describe its
variables. This file is never imported by the daemon: its source is sent to the
kernel (see :mod:`.variables`), executed in a namespace of its own, and it
prints one JSON document between two markers.

It imports only the standard library (the kernel's environment is the user's),
and pandas, numpy or polars only when the user's code imported them already. It
reads the user's namespace and never writes to it: every name it makes lives in
its own globals, which are dropped when it returns.

Bounded: each object gets `objectSeconds` (an interval timer on the kernel's
main thread raises inside a slow `__repr__`), the whole run `totalSeconds`;
previews are cut to `previewChars`; at most `maxVariables` variables are listed
and the document stays under `maxBytes`. An object whose repr (or anything else
asked of it) raises is reported as such, with the exception's type only (its
message could be as slow or broken as the object).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import reprlib
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

#: Never listed: what a module, function or class is (the user's code, not data).
_SKIPPED_TYPES: tuple[type, ...] = (
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.BuiltinMethodType,
    type,
)

_IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})


class _TimedOut(BaseException):
    """Raised by the interval timer inside a slow call (a BaseException, so that a
    `__repr__` catching Exception cannot swallow it)."""


class _Failed(Exception):
    """What a guarded call gave instead of a value."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _TimedOut


class _Clock:
    """Deadlines for each call on a user's object and for the whole run."""

    def __init__(self, object_seconds: float, total_seconds: float) -> None:
        self.object_seconds = object_seconds
        self.end = time.monotonic() + total_seconds
        self.alarms = threading.current_thread() is threading.main_thread() and hasattr(
            signal, "setitimer"
        )

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.end

    def call(self, fn: Callable[[], Any]) -> Any:
        """`fn()` within `object_seconds` (and the run's deadline), or
        _Failed("timed out" / the exception's type)."""
        left = min(self.end - time.monotonic(), self.object_seconds)
        if left <= 0:
            raise _Failed(f"timed out after {self.object_seconds:g} s")
        try:
            if self.alarms:
                signal.setitimer(signal.ITIMER_REAL, left)
            try:
                return fn()
            finally:
                if self.alarms:
                    signal.setitimer(signal.ITIMER_REAL, 0)
        except _TimedOut:
            raise _Failed(f"timed out after {self.object_seconds:g} s") from None
        except Exception as exc:
            raise _Failed(f"raised {type(exc).__name__}") from None


@contextlib.contextmanager
def _alarm_handler(clock: _Clock) -> Iterator[None]:
    """Our SIGALRM handler while we run; the user's handler and timer after."""
    if not clock.alarms:
        yield
        return
    old_handler = signal.signal(signal.SIGALRM, _on_alarm)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, 0)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay > 0:
            left = max(old_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _type_name(t: type) -> str:
    module = getattr(t, "__module__", "") or ""
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", "?")
    if module in ("builtins", "__main__", ""):
        return str(name)
    return f"{module.split('.')[0]}.{name}"


def _module(name: str) -> Any:
    """A library the user imported already (never imported here)."""
    return sys.modules.get(name)


#: The kinds the inspection knows, in the order they are tried: (module, class).
_KINDS = (
    ("pandas", "DataFrame"),
    ("pandas", "Series"),
    ("polars", "DataFrame"),
    ("polars", "Series"),
    ("numpy", "ndarray"),
)


def _kind(value: Any) -> str:
    t = type(value)
    for module_name, class_name in _KINDS:
        module = _module(module_name)
        if module is not None and issubclass(t, getattr(module, class_name)):
            return f"{module_name}.{class_name}"
    return "other"


class _Repr(reprlib.Repr):
    """reprlib's limits, but a repr that raises is reported, not disguised."""

    def repr_instance(self, x: Any, level: int) -> str:
        text = repr(x)
        if not isinstance(text, str):
            raise TypeError("repr gave no text")
        return _cut(text, self.maxother)


def _bounded_repr(value: Any, limit: int) -> str:
    r = _Repr()
    r.maxstring = limit
    r.maxother = limit
    r.maxlong = 60
    r.maxlevel = 3
    r.maxlist = r.maxtuple = r.maxset = r.maxfrozenset = r.maxdeque = r.maxarray = 12
    r.maxdict = 8
    text = r.repr(value)
    if not isinstance(text, str):
        raise TypeError("repr gave no text")
    return _cut(text, limit)


def _ints(value: Any) -> list[int] | None:
    if isinstance(value, tuple) and all(isinstance(n, int) for n in value):
        return [int(n) for n in value]
    return None


class _Inspector:
    def __init__(self, request: dict[str, Any], clock: _Clock) -> None:
        self.preview = int(request.get("previewChars", 200))
        self.max_columns = int(request.get("maxColumns", 50))
        self.clock = clock

    def _try(self, out: dict[str, Any], key: str, fn: Callable[[], Any]) -> None:
        try:
            value = self.clock.call(fn)
        except _Failed as failed:
            out.setdefault("error", f"{key}: {failed}")
            return
        if value is not None:
            out[key] = value

    # ---- one line per variable --------------------------------------------------

    def summary(self, name: str, value: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"name": name, "type": _type_name(type(value))}
        kind = _kind(value)
        if kind == "pandas.DataFrame":
            self._try(out, "shape", lambda: _ints(value.shape))
            self._try(out, "columns", lambda: self._columns(list(value.dtypes.items())))
            self._try(out, "columnsOmitted", lambda: max(value.shape[1] - self.max_columns, 0))
            self._try(out, "head", lambda: self._frame_head(value, 3))
            self._try(out, "memory", lambda: int(value.memory_usage(index=True, deep=False).sum()))
        elif kind == "pandas.Series":
            self._try(out, "shape", lambda: _ints(value.shape))
            self._try(out, "dtype", lambda: str(value.dtype))
            self._try(out, "memory", lambda: int(value.memory_usage(index=True, deep=False)))
            self._try(out, "head", lambda: self._frame_head(value, 3))
        elif kind == "polars.DataFrame":
            self._try(out, "shape", lambda: _ints(value.shape))
            self._try(out, "memory", lambda: int(value.estimated_size()))
            self._try(out, "columns", lambda: self._columns(list(value.schema.items())))
            self._try(out, "columnsOmitted", lambda: max(value.width - self.max_columns, 0))
            self._try(out, "head", lambda: _cut(repr(value.head(3)), self.preview * 8))
        elif kind == "polars.Series":
            self._try(out, "shape", lambda: _ints(value.shape))
            self._try(out, "dtype", lambda: str(value.dtype))
            self._try(out, "memory", lambda: int(value.estimated_size()))
            self._try(out, "preview", lambda: _cut(repr(value.head(5)), self.preview))
        elif kind == "numpy.ndarray":
            self._try(out, "shape", lambda: _ints(value.shape))
            self._try(out, "dtype", lambda: str(value.dtype))
            self._try(out, "memory", lambda: int(value.nbytes))
            self._try(out, "preview", lambda: self._array_preview(value))
        else:
            self._generic(out, value)
        return out

    def _generic(self, out: dict[str, Any], value: Any) -> None:
        t = type(value)
        if self._has(t, "shape"):
            self._try(out, "shape", lambda: _ints(value.shape))
        if self._has(t, "__len__"):
            self._try(out, "length", lambda: len(value))
        self._try(out, "memory", lambda: int(sys.getsizeof(value)))
        self._try(out, "preview", lambda: _bounded_repr(value, self.preview))

    def _has(self, t: type, name: str) -> bool:
        """Whether the type has `name` (a metaclass's lookup is bounded too)."""
        try:
            return bool(self.clock.call(lambda: hasattr(t, name)))
        except _Failed:
            return False

    def _columns(self, items: list[tuple[Any, Any]]) -> list[dict[str, str]]:
        return [
            {"name": _cut(str(k), 100), "dtype": _cut(str(v), 60)}
            for k, v in items[: self.max_columns]
        ]

    def _frame_head(self, frame: Any, rows: int) -> str:
        text = frame.head(rows).to_string(max_cols=12, max_colwidth=30)
        return _cut(str(text), self.preview * 8)

    def _array_preview(self, array: Any) -> str:
        np = _module("numpy")
        text = np.array2string(array, threshold=20, edgeitems=3, max_line_width=120)
        return _cut(str(text), self.preview)

    # ---- one variable in depth --------------------------------------------------

    def detail(self, name: str, value: Any) -> dict[str, Any]:
        summary = self.summary(name, value)
        sections: list[dict[str, str]] = []
        limit = self.preview * 40

        def section(title: str, fn: Callable[[], Any]) -> None:
            try:
                text = self.clock.call(fn)
            except _Failed as failed:
                text = f"({failed})"
            sections.append({"title": title, "text": _cut(str(text), limit)})

        kind = _kind(value)
        if kind == "pandas.DataFrame":
            section("dtypes", lambda: value.dtypes.to_string())
            section("memory (deep)", lambda: f"{int(value.memory_usage(deep=True).sum())} bytes")
            section("null counts", lambda: value.isna().sum().to_string())
            section("describe()", lambda: value.describe(include="all").to_string(max_cols=30))
            section("head", lambda: value.head(5).to_string(max_cols=30, max_colwidth=40))
        elif kind == "pandas.Series":
            section("memory (deep)", lambda: f"{int(value.memory_usage(deep=True))} bytes")
            section("null count", lambda: str(int(value.isna().sum())))
            section("describe()", lambda: value.describe().to_string())
            section("head", lambda: value.head(10).to_string())
        elif kind == "polars.DataFrame":
            section("schema", lambda: "\n".join(f"{k}: {v}" for k, v in value.schema.items()))
            section("null counts", lambda: repr(value.null_count()))
            section("describe()", lambda: repr(value.describe()))
            section("head", lambda: repr(value.head(5)))
        elif kind == "polars.Series":
            section("null count", lambda: str(value.null_count()))
            section("describe()", lambda: repr(value.describe()))
            section("head", lambda: repr(value.head(10)))
        elif kind == "numpy.ndarray":
            section("statistics", lambda: self._array_stats(value))
            section("values", lambda: self._array_values(value))
        else:
            section("repr", lambda: _bounded_repr(value, limit))
            section("attributes", lambda: self._attributes(value))
        summary["sections"] = sections
        return summary

    def _array_stats(self, array: Any) -> str:
        np = _module("numpy")
        if array.size == 0:
            return "empty"
        if not (np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.bool_)):
            return f"dtype {array.dtype}: no numeric statistics"
        with np.errstate(all="ignore"):
            values = array.astype("float64", copy=False)
            return "\n".join(
                [
                    f"min: {float(np.nanmin(values))!r}",
                    f"max: {float(np.nanmax(values))!r}",
                    f"mean: {float(np.nanmean(values))!r}",
                    f"std: {float(np.nanstd(values))!r}",
                    f"nan count: {int(np.isnan(values).sum())}",
                ]
            )

    def _array_values(self, array: Any) -> str:
        np = _module("numpy")
        return str(np.array2string(array, threshold=200, edgeitems=5, max_line_width=120))

    def _attributes(self, value: Any) -> str:
        names = [n for n in dir(value) if not n.startswith("_")]
        shown = names[:80]
        more = f"\n… and {len(names) - len(shown)} more" if len(names) > len(shown) else ""
        return ", ".join(shown) + more


def _user_namespace() -> tuple[dict[str, Any], frozenset[str]]:
    """The user's namespace and the names IPython hides from `%who`."""
    ipython_module = sys.modules.get("IPython")
    shell = ipython_module.get_ipython() if ipython_module is not None else None
    if shell is not None:
        return shell.user_ns, frozenset(shell.user_ns_hidden)
    main = sys.modules["__main__"]
    return vars(main), frozenset()


def _listed(name: str, value: Any, hidden: frozenset[str], private: bool) -> bool:
    if name.startswith("_") and not private:
        return False
    if name in hidden or name in _IPYTHON_NAMES or _is_output_cache(name):
        return False
    # type(), not isinstance(): an object's own `__class__` could lie, hang or raise.
    return not issubclass(type(value), _SKIPPED_TYPES)


def _is_output_cache(name: str) -> bool:
    """IPython's `_1`, `_i1`, `_ii`, `_iii`, `_`, `__`, `___`."""
    stripped = name.lstrip("_")
    return stripped == "" or stripped.isdigit() or (stripped[:1] == "i" and stripped[1:].isdigit())


def _run(request: dict[str, Any]) -> dict[str, Any]:
    clock = _Clock(float(request.get("objectSeconds", 1.0)), float(request.get("totalSeconds", 5)))
    inspector = _Inspector(request, clock)
    namespace, hidden = _user_namespace()
    if request.get("mode") == "describe":
        name = str(request["name"])
        if name not in namespace:
            return {"status": "missing"}
        with _alarm_handler(clock):
            return {"status": "ok", "detail": inspector.detail(name, namespace[name])}
    private = bool(request.get("private", False))
    max_variables = int(request.get("maxVariables", 200))
    max_bytes = int(request.get("maxBytes", 200_000))
    names = sorted(
        name
        for name, value in list(namespace.items())
        if isinstance(name, str) and _listed(name, value, hidden, private)
    )
    variables: list[dict[str, Any]] = []
    size = 0
    truncated = None
    with _alarm_handler(clock):
        for name in names:
            if len(variables) >= max_variables:
                truncated = "count"
                break
            if clock.out_of_time():
                truncated = "time"
                break
            if name not in namespace:
                continue
            item = inspector.summary(name, namespace[name])
            item_size = len(json.dumps(item, ensure_ascii=False))
            if size + item_size > max_bytes:
                truncated = "size"
                break
            size += item_size
            variables.append(item)
    reply: dict[str, Any] = {
        "status": "ok",
        "variables": variables,
        "omitted": len(names) - len(variables),
    }
    if truncated is not None:
        reply["truncated"] = truncated
    return reply


def main(encoded_request: str) -> None:
    """Inspect as the base64 JSON request says; print the reply between markers.
    Whatever the user's objects print meanwhile is swallowed."""
    request = json.loads(base64.b64decode(encoded_request).decode("utf-8"))
    marker = str(request["marker"])
    swallowed = io.StringIO()
    try:
        with contextlib.redirect_stdout(swallowed), contextlib.redirect_stderr(swallowed):
            reply = _run(request)
    except Exception as exc:
        reply = {"status": "error", "message": f"the inspection raised {type(exc).__name__}"}
    text = json.dumps(reply, ensure_ascii=True, default=str)
    sys.stdout.write(f"{marker}{text}{marker}\n")
    sys.stdout.flush()
