"""storage: round trips, atomic writes, metric-level merges, file names."""

from __future__ import annotations

import json
import os

import pytest

from pytest_torchbench.judging.results import BenchmarkResult, Environment, OpsMetric, TimeMetric
from pytest_torchbench.store import storage
from pytest_torchbench.store.storage import (
    BaselineError,
    atomic_write_many,
    load_set_from_folder,
    merge_entries,
    module_file_name,
    parse_baseline_document,
    render_baseline_document,
    save_set,
)

ENV = Environment({"torch": "2.13", "python": "3.11"})


def _result(key, module="tests/test_a.py", times=(1e-3, 1.1e-3, 0.9e-3), ops=None, env=ENV):
    result = BenchmarkResult(
        key=key, module=module, label=key.split("::")[-1], sub_label="", description=""
    )
    result.metrics["time"] = TimeMetric(10, [t * 10 for t in times])
    result.environments["time"] = env
    if ops is not None:
        result.metrics["ops"] = OpsMetric(ops)
        result.environments["ops"] = env
    return result


@pytest.mark.parametrize(
    "module, expected",
    [
        ("tests/bench/test_ops.py", "tests/bench/test_ops.json"),
        ("test_a.py", "test_a.json"),
        ("/abs/tests/test_a.py", "abs/tests/test_a.json"),
        ("tests\\win\\test_b.py", "tests/win/test_b.json"),
        ("../escape/test_c.py", "escape/test_c.json"),
        ("", "_.json"),
    ],
)
def test_module_file_name(module, expected):
    assert module_file_name(module) == expected


def test_round_trip_is_byte_identical(tmp_path):
    results = [
        _result("tests/test_a.py::test_b", ops={"aten::add": 2.0}),
        _result("tests/test_a.py::test_a"),
    ]
    paths = save_set(tmp_path / "main", results)
    assert paths == [tmp_path / "main" / "tests" / "test_a.json"]
    text = paths[0].read_text()
    loaded = load_set_from_folder(tmp_path / "main", "main")
    assert sorted(loaded.entries) == ["tests/test_a.py::test_a", "tests/test_a.py::test_b"]
    entry = loaded.get("tests/test_a.py::test_b")
    assert entry.metrics["time"].raw_times == pytest.approx([0.01, 0.011, 0.009])
    assert entry.metrics["ops"].ops == {"aten::add": 2.0}
    assert entry.environments["time"] == ENV
    assert render_baseline_document("tests/test_a.py", loaded.entries.values()) == text
    assert save_set(tmp_path / "main", results[::-1]) == []  # same results: nothing changes
    document = json.loads(text)
    assert list(document["environments"]) == [ENV.id]


def test_atomic_write_leaves_the_old_file_when_rendering_or_writing_fails(tmp_path, monkeypatch):
    folder = tmp_path / "main"
    save_set(
        folder,
        [
            _result("tests/test_a.py::test_a"),
            _result("tests/test_b.py::test_b", module="tests/test_b.py"),
        ],
    )
    files = sorted(folder.rglob("*.json"))
    before = {p: p.read_bytes() for p in files}

    def broken_render(module, entries):
        raise RuntimeError("render failed")

    monkeypatch.setattr(storage, "render_baseline_document", broken_render)
    with pytest.raises(RuntimeError):
        save_set(folder, [_result("tests/test_a.py::test_a", times=(5e-3,))])
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in files} == before

    # a failure while staging the second file: the first is not renamed into place either
    real_replace = os.replace
    monkeypatch.setattr(
        os,
        "fsync",
        lambda fd: (
            (_ for _ in ()).throw(OSError("disk full"))
            if len(list(folder.rglob(".*.tmp"))) > 1
            else None
        ),
    )
    with pytest.raises(OSError):
        atomic_write_many({p: "changed\n" for p in files})
    assert {p: p.read_bytes() for p in files} == before
    assert not list(folder.rglob("*.tmp"))
    assert os.replace is real_replace


def test_corrupt_file_is_not_overwritten_by_save(tmp_path):
    folder = tmp_path / "main"
    path = folder / "tests" / "test_a.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": 1, ')
    with pytest.raises(BaselineError, match="is not valid JSON"):
        save_set(folder, [_result("tests/test_a.py::test_a")])
    assert path.read_text() == '{"schema": 1, '


@pytest.mark.parametrize(
    "text, needle",
    [
        ("nope", "not valid JSON"),
        ("[]", "not a JSON object"),
        ('{"schema": 2}', "has schema 2"),
        ('{"module": "m"}', "has schema None"),
        ('{"schema": 1, "module": "m"}', "missing field 'benchmarks'"),
        (
            '{"schema": 1, "module": "m", "benchmarks": {"k": {"metrics": {"speed": {}}}}}',
            "holds metric 'speed', which no loaded plugin registers",
        ),
        (
            '{"schema": 1, "module": "m", "benchmarks": {"k": {"metrics": {"time": '
            '{"number_per_run": 1, "raw_times": [1], "env": "abc"}}}}}',
            "unknown environment id 'abc'",
        ),
        (
            '{"schema": 1, "module": "m", "benchmarks": {"k": {"metrics": {"time": '
            '{"number_per_run": 0, "raw_times": [1]}}}}}',
            "time.number_per_run is 0; it must be a whole number >= 1",
        ),
    ],
)
def test_parse_errors_name_the_file(text, needle):
    with pytest.raises(BaselineError) as info:
        parse_baseline_document(text, "baselines/main/x.json")
    message = str(info.value)
    assert "baselines/main/x.json" in message and needle in message and "\n" not in message


def test_merge_entries_replaces_metrics_one_by_one():
    old_env = Environment({"torch": "old"})
    existing = {
        "a": _result("a", ops={"aten::mm": 1.0}, env=old_env),
        "b": _result("b", env=old_env),
    }
    new_a = _result("a", times=(2e-3,))
    new_a.label = "renamed"
    new_c = _result("c")
    new_c.extras["trace"] = "x"
    merged = merge_entries(existing, [new_a, new_c])
    assert sorted(merged) == ["a", "b", "c"]
    assert merged["a"].metrics["time"].raw_times == [0.02]
    assert merged["a"].environments["time"] == ENV
    assert merged["a"].metrics["ops"].ops == {"aten::mm": 1.0}  # kept: not measured now
    assert merged["a"].environments["ops"] == old_env
    assert merged["a"].label == "renamed"
    assert merged["b"] is not existing["b"] and merged["b"].metrics == existing["b"].metrics
    assert merged["c"].extras == {}
    # the inputs are not modified
    assert existing["a"].metrics["time"].raw_times == pytest.approx([0.01, 0.011, 0.009])
    assert existing["a"].label == "a"


def test_save_keeps_other_modules_and_entries(tmp_path):
    folder = tmp_path / "main"
    save_set(
        folder,
        [_result("tests/test_a.py::x"), _result("tests/test_b.py::y", module="tests/test_b.py")],
    )
    b_before = (folder / "tests" / "test_b.json").read_bytes()
    changed = save_set(folder, [_result("tests/test_a.py::z")])
    assert changed == [folder / "tests" / "test_a.json"]
    assert (folder / "tests" / "test_b.json").read_bytes() == b_before
    assert sorted(load_set_from_folder(folder, "main").entries) == [
        "tests/test_a.py::x",
        "tests/test_a.py::z",
        "tests/test_b.py::y",
    ]


def test_available_sets_and_names(tmp_path):
    assert storage.available_sets(tmp_path / "none") == []
    for name in ("main", "pr-1", ".hidden"):
        (tmp_path / name).mkdir()
    (tmp_path / "file.json").write_text("{}")
    assert storage.available_sets(tmp_path) == ["main", "pr-1"]
    storage.validate_set_name("v1.2_rc-3")
    for bad in ("", "../x", "a/b", ".hidden", "a b"):
        with pytest.raises(BaselineError):
            storage.validate_set_name(bad)


def test_set_names_are_bounded():
    storage.validate_set_name("a" * storage.SET_NAME_MAX)
    with pytest.raises(BaselineError, match="at most 100 characters, this one has 300"):
        storage.validate_set_name("a" * 300)


@pytest.mark.parametrize(
    "data, needle",
    [
        (b'{"x": "\xff"}', "is not UTF-8 text (byte 0xff at offset 7)"),
        # 3.10 says "(4300) for integer string conversion", 3.11+ "(4300 digits) for ..."
        (b'{"x": ' + b"1" * 5000 + b"}", "is not usable JSON (Exceeds the limit (4300"),
        (b"[" * 100_000 + b"]" * 100_000, "is not usable JSON (nested too deeply)"),
    ],
)
def test_unusable_bytes_are_one_baseline_error(data, needle):
    with pytest.raises(BaselineError) as info:
        parse_baseline_document(data, "b/x.json")
    assert needle in str(info.value) and "b/x.json" in str(info.value)


def test_stale_temp_files_of_dead_writers_are_swept_live_ones_kept(tmp_path):
    import subprocess
    import sys

    folder = tmp_path / "main"
    (folder / "tests").mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = int(done.stdout)  # that process has exited
    stale = folder / "tests" / f".test_a.json.{dead}.k2j3h4.tmp"
    live = folder / "tests" / f".test_a.json.{os.getppid()}.abcd.tmp"  # pytest's parent: alive
    foreign = folder / "tests" / ".notes.tmp"  # not a name storage makes
    for path in (stale, live, foreign):
        path.write_text("partial")
    save_set(folder, [_result("tests/test_a.py::test_a")])
    assert not stale.exists() and live.exists() and foreign.exists()


def test_saved_stamp_changes_only_with_the_entry(tmp_path):
    folder = tmp_path / "main"
    first = {"commit": "a" * 40, "time": "2026-01-01T00:00:00Z"}
    second = {"commit": "b" * 40, "time": "2026-02-01T00:00:00Z"}
    save_set(folder, [_result("tests/test_a.py::x"), _result("tests/test_a.py::y")], stamp=first)
    path = folder / "tests" / "test_a.json"
    before = path.read_bytes()
    assert (
        save_set(
            folder, [_result("tests/test_a.py::x"), _result("tests/test_a.py::y")], stamp=second
        )
        == []
    )
    assert path.read_bytes() == before  # unchanged results: same bytes, old stamps kept
    save_set(folder, [_result("tests/test_a.py::x", times=(2e-3,))], stamp=second)
    saved = {k: v["saved"] for k, v in json.loads(path.read_text())["benchmarks"].items()}
    assert saved == {"tests/test_a.py::x": second, "tests/test_a.py::y": first}
    loaded = load_set_from_folder(folder, "main")
    assert loaded.get("tests/test_a.py::y").saved == first


def test_saving_nonsense_numbers_is_refused(tmp_path):
    result = _result("tests/test_a.py::x", times=(0.0,))
    with pytest.raises(
        BaselineError,
        match=r"tests/test_a.py::x: time.median is 0.0; it must be > 0.*nothing was saved",
    ):
        save_set(tmp_path / "main", [result])
    assert not (tmp_path / "main").exists()


def test_saves_are_serialised_by_the_set_lock(tmp_path):
    """flock locks belong to an open file description: a second open in this process waits too."""
    import threading

    folder = tmp_path / "main"
    order: list[str] = []
    with storage.set_lock(folder):
        thread = threading.Thread(
            target=lambda: (
                save_set(folder, [_result("tests/test_a.py::x")]),
                order.append("saved"),
            )
        )
        thread.start()
        thread.join(0.5)
        order.append("released")
    thread.join(10)
    assert order == ["released", "saved"]


def _document(metric, data):
    return json.dumps(
        {"schema": 1, "module": "m.py", "benchmarks": {"m.py::t": {"metrics": {metric: data}}}}
    )


@pytest.mark.parametrize(
    "metric, data, needle",
    [
        (
            "time",
            {"number_per_run": 10, "raw_times": [0.0, 1e-3]},
            "time.raw_times[0] is 0.0; it must be > 0",
        ),
        (
            "time",
            {"number_per_run": 10, "raw_times": [-1e-3, 1e-3]},
            "time.raw_times[0] is -0.001; it must be > 0",
        ),
        (
            "time",
            {"number_per_run": 10, "raw_times": [1e-3, float("nan")]},
            "time.raw_times[1] is nan; it must be a finite",
        ),
        (
            "time",
            {"number_per_run": 10, "raw_times": [float("inf")]},
            "time.raw_times[0] is inf; it must be a finite",
        ),
        (
            "time",
            {"number_per_run": 10, "raw_times": [1e-3], "median": 0},
            "time.median is 0; it must be > 0",
        ),
        (
            "time",
            {"number_per_run": 1.5, "raw_times": [1e-3]},
            "time.number_per_run is 1.5; it must be a whole number",
        ),
        ("time", {"number_per_run": True, "raw_times": [1e-3]}, "time.number_per_run is True"),
        (
            "instructions",
            {"instructions_per_run": 0, "number_per_run": 100, "functions": {}},
            "instructions.instructions_per_run is 0; it must be > 0",
        ),
        (
            "instructions",
            {"instructions_per_run": -5.0, "number_per_run": 100, "functions": {}},
            "instructions.instructions_per_run is -5.0",
        ),
        (
            "instructions",
            {"instructions_per_run": 10**400, "number_per_run": 100, "functions": {}},
            "it must be a finite number",
        ),
        (
            "instructions",
            {"instructions_per_run": 1000.0, "number_per_run": 100, "functions": {"f": -3.0}},
            'instructions.functions["f"] is -3.0; it must be >= 0',
        ),
        ("ops", {"ops": {"aten::add": float("nan")}}, 'ops.ops["aten::add"] is nan'),
        ("ops", {"ops": {"aten::add": -1.0}}, 'ops.ops["aten::add"] is -1.0; it must be >= 0'),
        ("memory", {"peak_bytes": {"cpu": -5}}, 'memory.peak_bytes["cpu"] is -5; it must be >= 0'),
        ("memory", {"peak_bytes": {"cpu": float("-inf")}}, 'memory.peak_bytes["cpu"] is -inf'),
    ],
)
def test_nonsense_numbers_name_file_key_and_field(metric, data, needle):
    with pytest.raises(BaselineError) as info:
        parse_baseline_document(_document(metric, data), "b/x.json")
    message = str(info.value)
    assert (
        message.startswith("baseline file b/x.json: benchmark 'm.py::t': ") and needle in message
    ), message
    assert "\n" not in message


def test_zero_op_counts_and_zero_memory_are_accepted():
    for metric, data in (
        ("ops", {"ops": {"aten::add": 0.0}}),
        ("memory", {"peak_bytes": {"cpu": 0}}),
    ):
        assert parse_baseline_document(_document(metric, data), "b/x.json")["m.py::t"].metrics[
            metric
        ]


def test_saving_again_keeps_earlier_time_medians_only_in_the_same_environment(tmp_path):
    save_set(tmp_path / "main", [_result("tests/test_a.py::test_a", times=(1e-3,))])
    save_set(tmp_path / "main", [_result("tests/test_a.py::test_a", times=(2e-3,))])
    entry = load_set_from_folder(tmp_path / "main", "main").get("tests/test_a.py::test_a")
    assert entry.metrics["time"].history == [1e-3]
    other = Environment({"torch": "2.14", "python": "3.11"})
    save_set(tmp_path / "main", [_result("tests/test_a.py::test_a", times=(3e-3,), env=other)])
    entry = load_set_from_folder(tmp_path / "main", "main").get("tests/test_a.py::test_a")
    assert entry.metrics["time"].history == []  # another environment: earlier runs do not apply


# Every JSON value type, and strings that look like the number lists the file puts on one line.
ROUND_TRIP_VALUES = {
    "list_look_alikes": ["8 8", "[8 8]", "[1,2]", "[ 1 ]", "[-1e5, 2.5]", "x [3 4] y"],
    "escapes": 'quote " backslash \\ newline \n tab \t nul \x00 bell \x07',
    "unicode": "ü 中文 \u2028 \U0001f600",
    "lone_surrogates": ["\udc80", "a\ud800b", "\udfff"],
    "ints": [0, -1, 2**63, 10**40],
    "floats": [0.0, -0.0, 1e-300, 1.7976931348623157e308, 0.1, 1 / 3],
    "mixed": [1, "2", 3.0, None, True, [4, 5], {"six": [7]}],
    "bools": [True, False],
    "null": None,
    "empty": [[], {}, ""],
    "nested": {"a": {"b": {"c": [[1, 2], [3, 4]]}}},
}


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_VALUES))
def test_every_value_type_round_trips_through_a_save(tmp_path, name):
    """Saved text is json's: no string is ever rewritten (a parametrize id "8 8" was saved as
    [8, 8]), and what is read back is what was saved."""
    value = ROUND_TRIP_VALUES[name]
    keys = [
        "tests/test_a.py::test_f[8 8]",
        "tests/test_a.py::test_f[[1,2]]",
        f"tests/test_a.py::test_f[{name}]",
        "tests/test_a.py::test_f[\udc80]",
    ]
    results = [_result(key) for key in keys]
    for result in results:
        result.extra_info = {"value": value, "description [1 2]": "label [3 4]"}
        result.description = "[5 6]"
    paths = save_set(tmp_path / "main", results)
    raw = paths[0].read_bytes()
    raw.decode("utf-8")  # strict: a lone surrogate is an escape, not an unencodable character
    loaded = load_set_from_folder(tmp_path / "main", "main")
    assert sorted(loaded.entries) == sorted(keys)
    for key in keys:
        entry = loaded.get(key)
        assert entry.extra_info == {"value": value, "description [1 2]": "label [3 4]"}
        assert entry.description == "[5 6]"
    document = json.loads(raw)
    assert document["benchmarks"][keys[0]]["extra_info"]["value"] == value
    assert (
        save_set(tmp_path / "main", results) == []
    )  # saving again: the same bytes, no duplicate keys


def test_number_lists_stay_on_one_line_and_the_layout_is_json_indent_1(tmp_path):
    result = _result("tests/test_a.py::test_f[8 8]", times=(1e-3, 2e-3))
    result.extra_info = {"sizes": [1, 2, 3], "flags": [True, False], "names": ["a"]}
    text = render_baseline_document("tests/test_a.py", [result])
    assert '"raw_times": [0.01, 0.02]' in text
    assert '"sizes": [1, 2, 3]' in text
    assert '"tests/test_a.py::test_f[8 8]"' in text
    # Apart from number lists, the text is exactly json.dumps(indent=1, sort_keys=True).
    expected = json.dumps(json.loads(text), indent=1, sort_keys=True, ensure_ascii=False)
    assert text.replace(" ", "").replace("\n", "") == expected.replace(" ", "").replace("\n", "")
    assert '"flags": [\n' in text and '"names": [\n' in text


@pytest.fixture
def alarm():
    """Fail instead of hanging: a FIFO opened for reading waits for a writer forever."""
    import signal

    def timeout(signum, frame):
        raise TimeoutError("hung reading a special file")

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(
    "kind, needle",
    [
        ("zero", "is a device (through a symlink), not a regular file"),
        ("fifo", "is a FIFO, not a regular file"),
        ("folder", "is a directory, not a regular file"),
        ("dangling", "cannot be read (No such file or directory)"),
    ],
)
def test_special_files_in_a_set_are_one_error_not_a_hang(tmp_path, alarm, kind, needle):
    folder = tmp_path / "main"
    save_set(folder, [_result("tests/test_a.py::test_a")])
    special = folder / "tests" / "test_b.json"
    if kind == "zero":
        special.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(special)
    elif kind == "folder":
        special.mkdir()
        (special / "inner.txt").write_text("")
    else:
        special.symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(BaselineError) as info:
        load_set_from_folder(folder, "main")
    assert str(special) in str(info.value) and needle in str(info.value)
    # Saving into that module's file reads it first: the same error, and nothing is written.
    with pytest.raises(BaselineError) as info:
        save_set(folder, [_result("tests/test_b.py::test_b", module="tests/test_b.py")])
    assert str(special) in str(info.value) and needle in str(info.value)
    assert os.path.lexists(special)


def test_a_baseline_file_over_the_size_cap_is_not_parsed(tmp_path, monkeypatch):
    monkeypatch.setattr(storage, "MAX_BASELINE_BYTES", 1000)
    folder = tmp_path / "main"
    save_set(folder, [_result(f"tests/test_a.py::test_{i}") for i in range(20)])
    with pytest.raises(
        BaselineError, match=r"test_a.json is over 0 MiB, more than any baseline file holds"
    ):
        load_set_from_folder(folder, "main")


def test_a_folder_with_too_many_entries_is_not_walked_to_the_end(tmp_path, monkeypatch):
    monkeypatch.setattr(storage, "MAX_SET_ENTRIES", 10)
    for i in range(12):
        (tmp_path / f"d{i}").mkdir()
    with pytest.raises(
        BaselineError, match=r"holds over 10 files and folders, so it is not a baseline set"
    ):
        load_set_from_folder(tmp_path, "x")


@pytest.mark.parametrize(
    "metric, data, needle",
    [
        (
            "ops",
            {"ops": {"aten::add": "1"}},
            """ops.ops["aten::add"] is '1'; it must be a number""",
        ),
        ("ops", {"ops": {"aten::add": True}}, 'ops.ops["aten::add"] is True; it must be a number'),
        ("ops", {"ops": {"aten::add": None}}, 'ops.ops["aten::add"] is None; it must be a number'),
        (
            "memory",
            {"peak_bytes": {"cpu": "5"}},
            """memory.peak_bytes.cpu is '5'; it must be a number""",
        ),
        (
            "time",
            {"number_per_run": 10, "raw_times": ["1e-3"]},
            "time.raw_times[0] is '1e-3'; it must be a number",
        ),
        (
            "time",
            {"number_per_run": 10, "raw_times": [1e-3], "cpu_share": 5},
            "time.cpu_share is 5; it must be a fraction from 0 to 1",
        ),
        (
            "time",
            {"number_per_run": 10, "raw_times": [1e-3], "cpu_share": True},
            "time.cpu_share is True; it must be a number",
        ),
        (
            "instructions",
            {"instructions_per_run": 10.0, "number_per_run": 100, "functions": {"f": False}},
            "instructions.functions.f is False; it must be a number",
        ),
        (
            "compile",
            {
                "calls": 3,
                "graphs": "1",
                "graph_breaks": 0,
                "recompiles": 0,
                "breaks": [],
                "recompile_reasons": [],
            },
            "compile.graphs is '1'; it must be a number",
        ),
    ],
)
def test_numbers_that_are_strings_or_booleans_are_rejected(metric, data, needle):
    """float("1") and float(True) are 1.0: without a type check, a corrupt count read as a count."""
    with pytest.raises(BaselineError) as info:
        parse_baseline_document(_document(metric, data), "b/x.json")
    assert needle in str(info.value), str(info.value)


@pytest.mark.parametrize(
    "text, needle",
    [
        (
            '{"schema": true, "module": "m.py", "benchmarks": {}}',
            "has schema True, this pytest-torchbench reads schema 1",
        ),
        (
            '{"schema": 1.0, "module": "m.py", "benchmarks": {}}',
            "has schema 1.0, this pytest-torchbench reads schema 1",
        ),
        (
            '{"schema": "1", "module": "m.py", "benchmarks": {}}',
            "has schema '1', this pytest-torchbench reads schema 1",
        ),
        (
            '{"schema": 2, "module": "m.py", "benchmarks": {}}',
            "has schema 2, written by a newer pytest-torchbench (this one reads schema 1); "
            "it was left untouched: upgrade pytest-torchbench",
        ),
        (
            '{"schema": 1, "module": "m.py", "benchmarks": {}, "schema": 1}',
            'key "schema" appears twice in one object',
        ),
        (
            '{"schema": 1, "module": "m.py", "benchmarks": {"m.py::t": {"metrics": {}}, '
            '"m.py::t": {"metrics": {}}}}',
            'key "m.py::t" appears twice',
        ),
    ],
)
def test_schema_and_duplicate_keys_are_checked(text, needle):
    with pytest.raises(BaselineError) as info:
        parse_baseline_document(text, "b/x.json")
    assert needle in str(info.value), str(info.value)
    assert "re-save" not in str(info.value) or "newer" not in str(info.value)


def test_a_results_file_given_as_a_baseline_says_what_it_is(tmp_path):
    from pytest_torchbench.reports import jsonreport

    path = tmp_path / "results.json"
    jsonreport.write(path, [_result("tests/test_a.py::x")], [], {"modes": ["time"]})
    with pytest.raises(BaselineError) as info:
        storage.load_baseline_file(path)
    message = str(info.value)
    assert f"{path} is the results file of a run (--bench-json), not a baseline file" in message, (
        message
    )
    assert "malformed" not in message and "delete" not in message
