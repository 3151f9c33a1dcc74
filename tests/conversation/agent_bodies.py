"""The openings real agent CLIs send (their preambles around the person's request), as Ruyi sees them."""

from __future__ import annotations

from typing import Any

Message = dict[str, Any]
REQUEST = "List the files in this folder and summarize what each one does."

CLAUDE_REMINDER_BEFORE = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\n"
    "Codebase and user instructions are shown below. Be sure to adhere to these instructions.\n\n"
    "Contents of /home/dev/project/CLAUDE.md (project instructions, checked into the codebase):\n\nUse uv for Python.\n\n"
    "# currentDate\nToday's date is 2026-11-27.\n\n      IMPORTANT: this context may or may not be relevant to your tasks."
    "\n</system-reminder>\n"
)
CLAUDE_REMINDER_AFTER = (
    "<system-reminder>\nThe following skills are available for use with the Skill tool:\n\n"
    "- update-config: Use this skill to configure the Claude Code harness via settings.json.\n</system-reminder>"
)


def claude_code_blocks() -> list[Message]:
    """Claude Code: reminders as separate content blocks before and after the request."""
    return [
        {"role": "system", "content": "You are Claude Code, Anthropic's official CLI for Claude."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": CLAUDE_REMINDER_BEFORE},
                {"type": "text", "text": REQUEST},
                {"type": "text", "text": CLAUDE_REMINDER_AFTER},
            ],
        },
    ]


def claude_code_one_text() -> list[Message]:
    """Claude Code: the reminders inside the one text of the message."""
    return [
        {"role": "system", "content": "You are Claude Code, Anthropic's official CLI for Claude."},
        {"role": "user", "content": CLAUDE_REMINDER_BEFORE + REQUEST + "\n" + CLAUDE_REMINDER_AFTER},
    ]


QWEN_ENVIRONMENT = (
    "This is the Qwen Code. We are setting up the context for our chat.\nToday's date is Friday, November 27, 2026 "
    "(formatted according to the user's locale).\nMy operating system is: linux\nI'm currently working in the directory: "
    "/tmp/scratch\nHere is the folder structure of the current working directories:\n\nShowing up to 20 items (files + "
    "folders).\n\n/tmp/scratch/\n├───a.py\n├───b.py\n└───notes.md"
)


def qwen_code() -> list[Message]:
    """Qwen Code: the environment as a first user message, an acknowledgement, then the request."""
    return [
        {"role": "system", "content": "You are Qwen Code, an interactive CLI agent."},
        {"role": "user", "content": QWEN_ENVIRONMENT},
        {"role": "assistant", "content": "Got it. Thanks for the context!"},
        {"role": "user", "content": REQUEST},
    ]


def codex_chat() -> list[Message]:
    """Codex (chat wire): AGENTS.md instructions and the environment as user messages, then the request."""
    return [
        {"role": "system", "content": "You are Codex, based on GPT-5. You are running as a coding agent in the Codex CLI."},
        {"role": "user", "content": "# AGENTS.md instructions for /tmp/scratch\n\n<INSTRUCTIONS>\nRun the tests.\n</INSTRUCTIONS>"},
        {
            "role": "user",
            "content": "<environment_context>\n  <cwd>/tmp/scratch</cwd>\n  <approval_policy>never</approval_policy>\n"
            "  <sandbox_mode>danger-full-access</sandbox_mode>\n  <shell>bash</shell>\n</environment_context>",
        },
        {"role": "user", "content": REQUEST},
    ]


def aider() -> list[Message]:
    """Aider: its repo map and the files in the chat, each acknowledged, then the request."""
    return [
        {"role": "system", "content": "Act as an expert software developer."},
        {
            "role": "user",
            "content": "Here are summaries of some files present in my git repository.\nDo not propose changes to "
            "these files, treat them as *read-only*.\n\na.py:\n│def main():\n⋮",
        },
        {"role": "assistant", "content": "Ok, I won't try and edit those files without asking first."},
        {"role": "user", "content": "I have *added these files to the chat* so you can go ahead and edit them.\n\nb.py\n```\nx = 1\n```"},
        {"role": "assistant", "content": "Ok, any changes I propose will be to those files."},
        {"role": "user", "content": REQUEST},
    ]


def mini_swe_agent_text_mode(observations: int) -> list[Message]:
    """mini-swe-agent in text mode whose failed replies were dropped: only user messages after the task."""
    out: list[Message] = [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
        {"role": "user", "content": "Please solve this issue: " + REQUEST},
    ]
    for k in range(observations):
        out.append({"role": "user", "content": f"<returncode>0</returncode>\n<output>\nfile_{k}.py\n" + "x" * 400 + "\n</output>"})
    return out
