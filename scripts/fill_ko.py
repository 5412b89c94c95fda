"""Fill empty Korean msgstr entries of locale/ko django.po from the glossary below.

Run after `manage.py makemessages -l ko`; then `manage.py compilemessages`.
Existing translations are never overwritten.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

GLOSSARY = {
    "Language": "언어",
    "Change": "변경",
    "Log out": "로그아웃",
    "Log in": "로그인",
    "AI": "AI",
    "Main menu": "주 메뉴",
    "AI chat room": "AI 채팅룸",
    "Username": "사용자 이름",
    "Password": "비밀번호",
    "Confirm your password": "비밀번호 확인",
    "Sensitive actions need your password again (valid for 10 minutes).": (
        "민감한 작업에는 비밀번호를 다시 입력해야 합니다(10분 동안 유효)."
    ),
    "Confirm": "확인",
    "Overview": "현황",
    "Audit log": "감사 로그",
    "Actor": "행위자",
    "Action": "동작",
    "Target": "대상",
    "Since": "시작",
    "Until": "끝",
    "Filter": "거르기",
    "When": "시각",
    "Via": "경로",
    "Result": "결과",
    "No entries.": "항목이 없습니다.",
    "Servers": "서버",
    "Modules": "모듈",
    "Jobs": "작업",
    "Incidents": "사건",
    "Approvals": "승인",
    "Settings": "설정",
    "DR": "DR",
    "AI connections": "AI 연동",
    "Unified": "통합",
}


def fill(po_path: Path) -> int:
    """Fill empty msgstr lines whose msgid is in the glossary; return how many."""
    text = po_path.read_text()
    count = 0

    def repl(match: re.Match) -> str:
        nonlocal count
        msgid = match.group(1)
        if msgid in GLOSSARY:
            count += 1
            return f'msgid "{msgid}"\nmsgstr "{GLOSSARY[msgid]}"'
        return match.group(0)

    text = re.sub(r'msgid "((?:[^"\\]|\\.)+)"\nmsgstr ""(?!\n")', repl, text)
    text = text.replace(
        '"Content-Type: text/plain; charset=CHARSET\\n"',
        '"Content-Type: text/plain; charset=UTF-8\\n"',
    )
    po_path.write_text(text)
    return count


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "locale/ko/LC_MESSAGES/django.po")
    print(f"filled {fill(path)} entries in {path}")
