# --- Coding agents against sluice serve (issue 24) ------------------------------
# Claude Code and Codex, pinned in tests/agents/package.json (npm, installed once
# under .build/agents/npm by scripts/agents/install.sh), each run for one turn
# with a tool round trip against bin/sluice on Gemma 3 270M (32k context: their
# prompts exceed 8k tokens). Logs and each request/response: .build/agents/logs/.
.PHONY: agents-check
agents-check: build gemma-model
	SLUICE_AGENTS=1 $(GO) test -count=1 -v -timeout 30m ./tests/agents
