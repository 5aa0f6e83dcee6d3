#!/usr/bin/env bash
# The README's main command: set up, build, and talk to the bundled demo model (models/glm5-demo).
# In a terminal it opens the chat; from a pipe or a script it asks one sample question and prints the
# answer. Arguments are passed to glm5rt-chat (e.g. scripts/demo.sh --temp 0.7).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh default
chat=build/examples/chat/glm5rt-chat
model=models/glm5-demo
sample='What does `from_pretrained` do?'
if [ -t 0 ]; then
  echo "glm5-demo answers questions about Python functions of the transformers library, e.g.: $sample"
  echo "(/help lists the commands; Ctrl-C stops a reply; Ctrl-D quits)"
  exec "$chat" "$@" "$model"
fi
echo "> $sample"
exec "$chat" "$@" --prompt "$sample" "$model"
