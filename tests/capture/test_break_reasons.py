"""Break reasons are one enumerated list (src/capture/breaks.def): the
recorder raises them by code, kiln._C.BREAK_REASONS names them, and
kiln._capture counts breaks by name.  opcodes.def's BREAK rows are what the
recorder breaks on, and the message names the opcode."""
import os
import re

import torch

import kiln
from kiln import _C, _capture

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src", "capture")


def _def_rows():
    text = open(os.path.join(SRC, "breaks.def")).read()
    return re.findall(r'^BREAK\((\w+),\s*("(?:[^"\\]|\\.)*")\)', text, re.M)


def test_break_reasons_exported_in_table_order():
    rows = _def_rows()
    assert tuple(n for n, _ in rows) == _C.BREAK_REASONS
    assert len(set(_C.BREAK_REASONS)) == len(_C.BREAK_REASONS)


def _calls(text, fname):
    """(code, argument count after it) for each call fname(r, KN_BRK_X, ...)."""
    out = []
    for m in re.finditer(re.escape(fname) + r"\(", text):
        i, depth, args, cur = m.end(), 1, [], ""
        while depth:
            ch = text[i]
            if ch == '"':   # skip a string literal
                j = i + 1
                while text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                cur += text[i:j + 1]
                i = j + 1
                continue
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            if ch == "," and depth == 1:
                args.append(cur.strip())
                cur = ""
            elif depth:
                cur += ch
            i += 1
        args.append(cur.strip())
        out.append(args)
    return out


def test_every_break_call_passes_its_format_arguments():
    """kn_brk's format comes from the table, so the C compiler cannot check
    it: every call must pass as many arguments as its message has %s/%d."""
    fmts = {n: eval(f) for n, f in _def_rows()}
    seen = set()
    for fn in sorted(os.listdir(SRC)):
        if not fn.endswith((".c", ".h")):
            continue
        text = open(os.path.join(SRC, fn)).read()
        for args in _calls(text, "kn_brk"):
            if args[0].startswith("kn_rec"):   # the definition
                continue
            code = args[1]
            assert code.startswith("KN_BRK_"), (fn, args)
            name = code[len("KN_BRK_"):]
            assert name in fmts, (fn, name)
            nconv = len(re.findall(r"%[-.0-9]*[sdc]", fmts[name].replace("%%", "")))
            assert len(args) - 2 == nconv, (fn, name, args)
            seen.add(name)
    assert seen == set(fmts), set(fmts) - seen   # no reason the code never raises


def _del_attr(x, o):
    y = x + 1
    del o.tag
    return y * 2


class _Obj:
    pass


def test_break_opcode_message_names_the_opcode_and_is_counted():
    o = _Obj()
    o.tag = 1
    before = _capture.break_counts["OPCODE_NOT_RECORDED"]
    x = torch.randn(3)
    ex = kiln.explain(_del_attr)(x, o)
    assert any("opcode DELETE_ATTR is not recorded" in b.reason for b in ex.breaks), [b.reason for b in ex.breaks]
    assert _capture.break_counts["OPCODE_NOT_RECORDED"] > before
    assert _capture.breaks[-1]["kind"] in _C.BREAK_REASONS


def test_opcode_table_break_rows_are_what_the_recorder_breaks_on():
    """Each BREAK row the running Python has is reported by name (the case
    list in record.c's run_one comes from opcodes.def)."""
    table = _C.opcode_table()
    assert table["DELETE_ATTR"] == "BREAK"
    assert table["LOAD_FAST"] == "HANDLED"
