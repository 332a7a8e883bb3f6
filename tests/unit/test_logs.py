"""The structured log line: fields as key=value, values that could split or forge quoted."""

from __future__ import annotations

import logging

import pytest

from tickwork.logs import KeyValueFormatter


def line(**fields: object) -> str:
    record = logging.makeLogRecord({"msg": "attempt finished", "levelname": "WARNING"})
    record.__dict__.update(fields)
    return KeyValueFormatter("%(message)s").format(record)


def test_plain_values_are_written_as_they_are() -> None:
    assert line(job_id=7, outcome="FAILED") == "attempt finished job_id=7 outcome=FAILED"


def test_a_message_with_spaces_newlines_or_equals_signs_stays_one_quoted_field() -> None:
    written = line(error='boom\n2026 INFO fake line job_id=1 "x"', job_id=3)
    assert "\n" not in written
    assert written == (
        'attempt finished error="boom\\n2026 INFO fake line job_id=1 \\"x\\"" job_id=3'
    )
    assert line(error="") == 'attempt finished error=""'


def test_unicode_line_separators_are_escaped_too() -> None:
    written = line(error="one\u2028two\u0085three", who="café")
    assert len(written.splitlines()) == 1
    assert written == 'attempt finished error="one\\u2028two\\u0085three" who="caf\\u00e9"'


def test_table_values_are_text_not_markup(capsys: pytest.CaptureFixture[str]) -> None:
    from tickwork.cli.common import print_table

    print_table("jobs", ("error",), [("ValueError: [/bold] closed nothing [link=x]y[/link]",)])
    assert "[/bold] closed nothing [link=x]y[/link]" in capsys.readouterr().out
