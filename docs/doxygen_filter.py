#!/usr/bin/env python3
"""Doxygen's input filter for the public headers (docs/Doxyfile).

The headers comment with plain `//`; this turns those comments into
Doxygen's, on the fly, so that the headers stay as they are:
  - the comment that opens a file, before `#pragma once`, documents the file;
  - a block of `//` lines documents what follows it (`///`);
  - a `//` after a member documents that member (`///<`), and so does a
    comment-only line that continues it;
  - a comment after a brace or a preprocessor line stays a plain comment;
  - the C header's `/* */` blocks become `/** */` (and `/**< */` after a
    member) by the same rules.
In the comments' text, characters Doxygen would take for markup outside
backquoted code (`<`, `>`, `&`, `@`, `#`, `\\`) are escaped.
"""
import re
import sys


def escape(text):
    out = []
    for i, part in enumerate(re.split(r'(`[^`]*`)', text)):
        if i % 2 == 1:
            out.append(part)  # code: as it is
        else:
            out.append(re.sub(r'([<>&@#\\])', r'\\\1', part))
    return ''.join(out)


def escape_block(text):
    """escape() for a line of a /* */ block, leaving its */ alone."""
    end = text.find('*/')
    if end < 0:
        return escape(text)
    return escape(text[:end]) + text[end:]


def trailing_comment(line):
    """The index of a `//` that follows code on `line` (not in a string), or -1."""
    quote = False
    i = 0
    while i < len(line) - 1:
        c = line[i]
        if c == '\\' and quote:
            i += 2
            continue
        if c == '"':
            quote = not quote
        elif not quote and line.startswith('//', i):
            return i
        i += 1
    return -1


def main():
    lines = open(sys.argv[1], encoding='utf-8').read().split('\n')
    out = []
    in_header = True       # still in the file's opening comment
    after_member = False   # the previous line ended with a member's comment
    in_block = False       # inside a /* */ comment (the C header's)
    for line in lines:
        stripped = line.lstrip()
        indent = line[:len(line) - len(stripped)]
        if in_block or stripped.startswith('/*'):
            # A block opening a line documents what follows it, except the
            # file's first, which documents the file; one after a member
            # documents that member. Its text is escaped as above.
            if not in_block:
                body = stripped[3:] if stripped.startswith('/**') else stripped[2:]
                if body.lstrip().startswith('----'):
                    head = '/*'  # a heading between groups: no one's documentation
                elif not out:
                    head = '/** \\file\n' + indent + ' *'
                else:
                    head = '/**'
                line = indent + head + (body if head == '/*' else escape_block(body))
            else:
                line = escape_block(line)
            in_block = '*/' not in stripped or stripped.endswith('/*')
            in_header = False
            out.append(line)
            continue
        at = line.find('/*')
        if at > 0 and line[:at].strip() and '*/' in line[at:] and not line[:at].lstrip().startswith('#'):
            end = line.index('*/', at)
            out.append(line[:at] + '/**<' + escape(line[at + 2:end]) + line[end:])
            after_member = False
            in_header = False
            continue
        if stripped.startswith('//'):
            text = stripped[2:]
            indent = line[:len(line) - len(stripped)]
            if in_header:
                prefix = '/// \\file\n///' if not out else '///'
                out.append(prefix + escape(text))
            elif after_member:
                out.append(indent + '///<' + escape(text))
            else:
                out.append(indent + '///' + escape(text))
            continue
        in_header = False
        after_member = False
        at = trailing_comment(line)
        code = line[:at].rstrip() if at >= 0 else ''
        if at >= 0 and code and not code.endswith(('{', '}', '};')) and not code.lstrip().startswith('#'):
            out.append(line[:at] + '///<' + escape(line[at + 2:]))
            after_member = True
        else:
            out.append(line)
    sys.stdout.write('\n'.join(out))


if __name__ == '__main__':
    main()
