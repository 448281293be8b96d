"""C++ and C function names as Callgrind writes them, made readable for a failure's lines:
template arguments, parameter lists and namespaces that say nothing collapsed, to a width."""

from __future__ import annotations

import re

#: Frames whose counts move with locking and thread hand-over rather than with the benchmark's own
#: work (the GIL, mutexes, thread-local lookups): summed on one line after the functions that
#: changed, so that they never crowd those out.
NOISE_FRAME = re.compile(
    r"(?:^|[:\s])(?:pthread_mutex_\w+|__pthread_mutex_\w+|pthread_cond_\w+|pthread_getspecific|"
    r"__tls_get_addr|take_gil|drop_gil|PyEval_SaveThread|PyEval_RestoreThread|"
    r"PyGILState_\w+|_PyThreadState_\w+|lll_\w+)(?:@|\b)"
)


def _collapse_brackets(text: str, opening: str, closing: str, keep_depth: int) -> str:
    """``a<b<c>, d>`` -> ``a<…>`` (keep_depth 0): nested argument lists folded beyond a depth."""
    out: list[str] = []
    depth = 0
    for char in text:
        if char == opening:
            depth += 1
            if depth == keep_depth + 1:
                out.append(opening + "…")
            elif depth <= keep_depth:
                out.append(char)
        elif char == closing and depth > 0:
            if depth == keep_depth + 1:
                out.append(closing)
            elif depth <= keep_depth:
                out.append(char)
            depth -= 1
        elif depth <= keep_depth:
            out.append(char)
    return "".join(out)


def short_function_name(name: str, width: int = 90) -> str:
    """A function name a person can read: file reduced to its base name, a long C++ name made
    readable (:func:`readable_cxx_name`), at most ``width`` characters. The full name stays in the
    baseline; this is for messages and reports only."""
    where, sep, function = name.partition(":")
    if not sep or "(" in where or "<" in where:
        where, function = "", name
    where = where.rsplit("/", 1)[-1]
    short = re.sub(r"@@?GLIBC_[0-9.]+$", "", function)
    if len(short) > width // 2:
        short = readable_cxx_name(short, width)
    if where and where != "???":
        short = f"{where}:{short}"
    return short if len(short) <= width else short[: width - 1] + "…"


#: Namespaces that say nothing a reader needs to tell torch's functions apart.
_NOISE_NAMESPACE = re.compile(
    r"\b(?:at|c10|std|native|detail|impl|vec|internal|AVX2|AVX512|DEFAULT|__detail|"
    r"__cxx11)::"
)
_CLONE_SUFFIX = re.compile(r"(?:\s*\[clone [^\]]*\])+$")


def readable_cxx_name(name: str, width: int = 90) -> str:
    """A long C++ function name, as a person reads it: without its return type, parameter lists,
    ``const``, the lambdas' ``operator()`` and noise namespaces (``at::native::``, ``(anonymous
    namespace)::``), with a repeated template argument given once; still too long, templates are
    folded from the deepest (``<…>``).

    Why: torch's kernels are templates instantiated with lambdas, and folding every bracket made
    all of them ``void c10::function_ref<…>::callback_fn<…>(…)``: five different kernels of one
    benchmark read the same. What tells them apart sits inside the template arguments
    (``callback_fn<VectorizedLoop2d<add_kernel::{lambda}>>``), so those are kept and the noise
    around them goes."""
    suffix_match = _CLONE_SUFFIX.search(name)
    suffix = suffix_match.group(0) if suffix_match else ""
    text = name[: len(name) - len(suffix)] if suffix else name
    text = text.replace("(anonymous namespace)::", "").replace("{lambda(", "{lambda#(")
    text = _without_parameters(text)
    text = text.replace("{lambda#", "{lambda").replace("::operator()", "")
    text = re.sub(r"\s+const\b", "", text)
    text = re.sub(r"(?:::\{lambda#?\d*\})+", "::{lambda}", text)
    text = re.sub(r"\{lambda#?(\d+)\}", r"{lambda}", text)
    text = _NOISE_NAMESPACE.sub("", text)
    text = re.sub(r"function_ref<[^<>]*>::callback_fn", "function_ref::callback_fn", text)
    text = _after_return_type(text.strip())
    text = _unique_template_arguments(text)
    text = re.sub(r"\s*>", ">", text)
    depth = max(_depths(text), default=0)
    while len(text) + len(suffix) > width and depth > 0:
        depth -= 1
        text = _collapse_brackets(text, "<", ">", depth)
    return text + suffix


def _without_parameters(text: str) -> str:
    """Every balanced ``(...)`` dropped, but ``operator()`` kept and a lambda's ``#(...)`` marker
    (see :func:`readable_cxx_name`) dropped with its parameters."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "(":
            if "".join(out[-8:]) == "operator" and text[i + 1 : i + 2] == ")":
                out.append("()")
                i += 2
                continue
            depth = 0
            while i < len(text):
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
                if depth == 0:
                    break
            if out and out[-1] == "#":
                out.pop()
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _after_return_type(text: str) -> str:
    """``void at::f<a, b>`` -> ``at::f<a, b>``: what follows the last space outside brackets."""
    depth, cut = 0, 0
    for index, char in enumerate(text):
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == " " and depth == 0:
            cut = index + 1
    return text[cut:]


def _unique_template_arguments(text: str) -> str:
    """``f<a, a, a, b>`` -> ``f<a, b>``, at every depth (a kernel templated on one lambda twice)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "<":
            out.append(text[i])
            i += 1
            continue
        depth, j, parts, start = 0, i, [], i + 1
        while j < len(text):
            if text[j] == "<":
                depth += 1
            elif text[j] == ">":
                depth -= 1
                if depth == 0:
                    break
            elif text[j] == "," and depth == 1:
                parts.append(text[start:j])
                start = j + 1
            j += 1
        parts.append(text[start:j])
        unique: list[str] = []
        for part in (_unique_template_arguments(p.strip()) for p in parts):
            if part not in unique:
                unique.append(part)
        out.append("<" + ", ".join(unique) + ">")
        i = j + 1
    return "".join(out)


def _depths(text: str) -> list[int]:
    depth, seen = 0, []
    for char in text:
        if char == "<":
            depth += 1
            seen.append(depth)
        elif char == ">":
            depth -= 1
    return seen
