"""The --kvax-report file: a run that stops early says so, whatever its exit status, and a run
killed before its end leaves what ran."""

import os
import subprocess
import sys

TESTS = '''
import pytest

def test_first():
    pass

def test_stops_the_run():
    pytest.exit("stopped", returncode=0)

def test_never_runs():
    pass
'''


def _report(tmp_path, body: str, *args: str) -> tuple[int, str]:
    (tmp_path / "test_some.py").write_text(body)
    report = tmp_path / "report.md"
    env = {**os.environ, "PYTEST_ADDOPTS": ""}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q",
                           "-p", "no:cacheprovider", str(tmp_path / "test_some.py"),
                           "--kvax-report", str(report), *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, report.read_text()


def test_a_run_stopped_early_is_reported_incomplete(tmp_path):
    returncode, text = _report(tmp_path, TESTS)
    assert returncode == 0  # the reason for the line: the exit status alone reads as a pass
    assert '"passed": 1' in text
    assert "incomplete: 2 of 3 selected tests did not run" in text
    assert f"- command: `pytest -q -p no:cacheprovider {tmp_path / 'test_some.py'}" in text


def test_a_whole_run_has_no_incomplete_line(tmp_path):
    """Deselected tests are not counted, and pytest-xdist's controller knows the selection."""
    returncode, text = _report(tmp_path, TESTS.replace('pytest.exit("stopped", returncode=0)',
                                                       "pass"), "-k", "not first", "-n", "2")
    assert returncode == 0
    assert '"passed": 2' in text and "incomplete" not in text


def test_a_killed_run_leaves_what_ran(tmp_path):
    """The file is rewritten as each test ends: a run killed by a timeout's KILL (as a GPU
    machine's call limit does) still reports the tests before it, marked as still running."""
    body = TESTS.replace('pytest.exit("stopped", returncode=0)',
                         "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    returncode, text = _report(tmp_path, body)
    assert returncode == -9
    assert "exit status: running (1 done so far" in text
    assert '"passed": 1' in text and "`test_some.py::test_first` | passed" in text
    assert "test_never_runs" not in text


def test_the_command_is_pytests_arguments_when_a_script_calls_pytest_main(tmp_path):
    (tmp_path / "test_some.py").write_text("def test_one():\n    pass\n")
    report = tmp_path / "report.md"
    script = ("import sys, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', "
              f"'-k', 'one', 'test_some.py', '--kvax-report', {str(report)!r}]))")
    env = {**os.environ, "PYTEST_ADDOPTS": ""}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "- command: `pytest -q -p no:cacheprovider -k one test_some.py --kvax-report" in (
        report.read_text())
