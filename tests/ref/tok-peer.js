#!/usr/bin/env node
// tok-peer.js MODULE_DIR < FILELIST > IDS
//
// The peer for tokenizer exactness: encodes each file named on stdin (one
// path a line) with the JavaScript GPT-2 encoder of the npm package
// gpt-3-encoder installed in MODULE_DIR, and writes one line per file: the
// ids separated by spaces, or "skip" for a file that is not valid UTF-8.
// The encoder concatenates arrays per piece (quadratic on a large text), so
// each file is fed to it in runs of whole pieces cut with the package's own
// split pattern.  A run ends after a piece that does not end in whitespace
// (the only lookahead in the pattern is on whitespace), so it re-splits into
// the same pieces and the ids are those of the whole file.
'use strict';
const fs = require('fs');
const path = require('path');

const dir = process.argv[2];
if (!dir) {
  process.stderr.write('usage: tok-peer.js MODULE_DIR < FILELIST\n');
  process.exit(2);
}
const enc = require(path.resolve(dir));
const src = fs.readFileSync(path.join(dir, 'Encoder.js'), 'utf8');
const m = src.match(/^const pat = \/(.*)\/gu$/m);
if (!m) {
  process.stderr.write('tok-peer.js: no split pattern in ' + dir + '/Encoder.js\n');
  process.exit(1);
}
const pat = new RegExp(m[1], 'gu');
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const files = fs.readFileSync(0, 'utf8').split('\n').filter(Boolean);
const out = [];
for (const f of files) {
  let text;
  try {
    text = utf8.decode(fs.readFileSync(f));
  } catch (e) {
    out.push('skip');
    continue;
  }
  const pieces = Array.from(text.matchAll(pat), (x) => x[0]);
  const ids = [];
  let run = [];
  for (let i = 0; i <= pieces.length; i++) {
    if (i < pieces.length) run.push(pieces[i]);
    if (i === pieces.length || (run.length >= 256 && !/\s$/u.test(pieces[i]))) {
      for (const id of enc.encode(run.join(''))) ids.push(id);
      run = [];
    }
  }
  if (enc.decode(ids) !== text) {
    process.stderr.write('tok-peer.js: ' + f + ': the peer does not round-trip\n');
    process.exit(1);
  }
  out.push(ids.join(' '));
}
process.stdout.write(out.join('\n') + '\n');
