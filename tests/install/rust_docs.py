#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/install/rust_docs.py: the Rust crate's statistics docs say what the
C header says. For every field of hz_class_stats_t and hz_stats_t that has a
comment in include/hakozuna.h, the doc comment of the same field of
ClassStats / Stats in bindings/rust/src/lib.rs must contain that comment's
text (case and line breaks aside). Run from the repository root."""
import re
import sys


def norm(text):
    return " ".join(text.split()).lower().rstrip(".")


def c_fields(header, struct):
    body = re.search(r"typedef struct %s_s \{(.*?)\} %s_t;" % (struct, struct), header, re.S).group(1)
    fields = {}
    for m in re.finditer(r"\b(\w+)(?:\[\w+\])?;\s*/\*(.*?)\*/", body, re.S):
        fields[m.group(1)] = norm(m.group(2))
    return fields


def rust_fields(src, struct):
    body = re.search(r"pub struct %s \{(.*?)\n\}" % struct, src, re.S).group(1)
    fields, doc = {}, []
    for line in body.splitlines():
        line = line.strip()
        if line.startswith("///"):
            doc.append(line[3:].strip())
        elif line.startswith("pub "):
            fields[re.match(r"pub (\w+)", line).group(1)] = norm(" ".join(doc))
            doc = []
        elif not line.startswith("//"):
            doc = []
    return fields


header = open("include/hakozuna.h").read()
src = open("bindings/rust/src/lib.rs").read()
bad = 0
for c_struct, rs_struct in (("hz_class_stats", "ClassStats"), ("hz_stats", "Stats")):
    c = c_fields(header, c_struct)
    rs = rust_fields(src, rs_struct)
    for name, text in c.items():
        if name not in rs:
            print("FAIL: %s.%s is missing from the crate" % (rs_struct, name))
            bad += 1
        elif text not in rs[name]:
            print("FAIL: %s.%s: the header says \"%s\", the crate \"%s\"" % (rs_struct, name, text, rs[name]))
            bad += 1
    if len(c) < 5:
        print("FAIL: only %d commented fields found in %s_t" % (len(c), c_struct))
        bad += 1
sys.exit(1 if bad else 0)
