"""The recorder's opcode table covers every opcode of the running Python.

src/capture/opcodes.def lists each opcode name of CPython 3.11, 3.12 and 3.13 as
HANDLED (record.c has a case for it) or BREAK (recording stops there with a
graph break).  A name in dis.opmap that the table lacks would be a silent gap.
"""
import dis
import sys

import kiln


def test_every_opcode_has_an_entry():
    table = kiln._C.opcode_table()
    missing = sorted(name for name in dis.opmap if name not in table)
    assert not missing, f"opcodes with neither a handler nor a graph-break entry: {missing}"


def test_entries_are_handled_or_break():
    table = kiln._C.opcode_table()
    assert set(table.values()) <= {"HANDLED", "BREAK"}


def test_core_opcodes_are_handled():
    table = kiln._C.opcode_table()
    core = ["LOAD_FAST", "STORE_FAST", "LOAD_CONST", "LOAD_GLOBAL", "LOAD_ATTR", "CALL", "BINARY_OP",
            "COMPARE_OP", "RETURN_VALUE", "FOR_ITER", "GET_ITER", "BUILD_TUPLE", "BUILD_LIST", "BUILD_MAP",
            "UNPACK_SEQUENCE", "MAKE_FUNCTION", "CALL_FUNCTION_EX", "BEFORE_WITH", "LOAD_DEREF", "STORE_ATTR"]
    core += ["PRECALL", "LOAD_METHOD"] if sys.version_info < (3, 12) else ["RETURN_CONST", "LOAD_SUPER_ATTR",
                                                                          "LOAD_FAST_AND_CLEAR", "END_FOR"]
    if sys.version_info >= (3, 13):
        core += ["CALL_KW", "TO_BOOL", "LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST",
                 "SET_FUNCTION_ATTRIBUTE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "CONVERT_VALUE"]
    assert all(table[c] == "HANDLED" for c in core), [c for c in core if table[c] != "HANDLED"]


def test_break_opcode_is_a_graph_break_not_an_error():
    # a generator function's own frame is left to CPython; consuming it inside
    # a compiled function is recorded by running the generator symbolically
    def gen(n):
        for i in range(n):
            yield i

    def f(x):
        return x + sum(gen(3))

    import torch

    x = torch.ones(2)
    assert torch.equal(kiln.compile(f, backend="eager")(x), f(x))
