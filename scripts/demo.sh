#!/usr/bin/env bash
# The README's main command: set up, build, and talk to the bundled demo model (models/glm5-demo).
# Extra arguments go to glm5rt-chat.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh default
exec build/examples/chat/glm5rt-chat models/glm5-demo "$@"
