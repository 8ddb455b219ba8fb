# --- The web page (issue 18) -------------------------------------------------
# The page is hand-written HTML/CSS/JS under server/web/assets, embedded with
# go:embed: nothing to build. Its browser test (server/web TestBrowser) runs
# Debian's chromium, unpacked with the libraries it lacks under .build/chromium
# by tests/web/fetch-chromium.sh (no root install), through playwright-core,
# which the test installs with npm ci in tests/web. A failed fetch is not fatal:
# the test then skips, saying why.
# `make web-screenshots` rewrites docs/web-chat.png and docs/web-engine.png.
# `make web-unit` (part of make test) runs the page's scripts' unit tests under
# node (tests/web/*.test.mjs: the Markdown scanner); without node it says so
# and passes, as the browser test skips.
.PHONY: web-deps web-test web-screenshots web-unit

web-unit:
	@if command -v node >/dev/null; then node --test tests/web/; else echo "web-unit: node not installed, skipped"; fi

test: web-unit

web-deps:
	-./tests/web/fetch-chromium.sh >/dev/null

test-deps: web-deps

web-test: $(TOKENIZERS_LIB) model web-deps
	$(GO) test -count=1 -run 'TestBrowser' -v ./server/web/

web-screenshots: $(TOKENIZERS_LIB) model web-deps
	mkdir -p .build/shots
	SLUICE_WEB_SCREENSHOTS=$(CURDIR)/.build/shots $(GO) test -count=1 -run 'TestBrowser' ./server/web/
	cp .build/shots/chat-mid-reply.png docs/web-chat.png
	cp .build/shots/engine-view.png docs/web-engine.png
