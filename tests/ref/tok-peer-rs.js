#!/usr/bin/env node
// tok-peer-rs.js TOKENIZER_JSON < FILELIST > IDS
//
// The reference peer: Hugging Face's tokenizers library itself (Rust, the
// npm package "tokenizers", its Node binding) on a tokenizer.json.  Encodes
// each file named on stdin without adding special tokens and writes one line
// per file: the ids separated by spaces, or "skip" for a file that is not
// valid UTF-8.  NODE_PATH must reach the package.
'use strict';
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

const json = process.argv[2];
if (!json) {
  process.stderr.write('usage: tok-peer-rs.js TOKENIZER_JSON < FILELIST\n');
  process.exit(2);
}
(async () => {
  const tok = Tokenizer.fromFile(json);
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const out = [];
  for (const f of fs.readFileSync(0, 'utf8').split('\n').filter(Boolean)) {
    let text;
    try {
      text = utf8.decode(fs.readFileSync(f));
    } catch (e) {
      out.push('skip');
      continue;
    }
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    out.push(enc.getIds().join(' '));
  }
  process.stdout.write(out.join('\n') + '\n');
})().catch((e) => {
  process.stderr.write('tok-peer-rs.js: ' + String(e).slice(0, 300) + '\n');
  process.exit(1);
});
