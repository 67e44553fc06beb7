"""src/compile/text.c: kiln's own formatter for the generated source (the
conversions generated code is made of) writes what libc's vsnprintf writes,
on a table of formats and values that includes the extremes of every
length, widths and precisions given and taken from `*`, and a buffer that
grows; a format with a float goes to libc whole."""
from kiln import _C


def test_the_formatter_writes_what_libc_writes():
    assert _C.str_printf_check() == ""
