#!/usr/bin/env node
/**
 * CLI: push deterministic demo batches into a flight-paimon push table, or durably into a Paimon
 * table (--paimon DB.TABLE), optionally as a named exactly-once producer (--producer ID); one
 * output line per event.
 */

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { demoSchema, makeBatch } from './rows.js';
import { PushStream, paimonTarget, producerState, pushTarget, security } from './flight.js';

const USAGE = `usage: producer.js --uri grpc://HOST:PORT (--table NAME [--partition 0] | --paimon DB.TABLE [--producer ID])
  [--batches 4] [--rows 1000] [--first-row 0] [--fail-after K --message TEXT] [--wrong-schema] [--timeout 120]
  [--token TOKEN (or FLIGHT_PAIMON_TOKEN)] [--tls-root-certs CA.pem] [--tls-cert-chain CERT.pem --tls-private-key KEY.pem]`;

function options() {
  const { values } = parseArgs({
    options: {
      uri: { type: 'string' }, table: { type: 'string' }, partition: { type: 'string', default: '0' },
      paimon: { type: 'string' }, producer: { type: 'string' },
      batches: { type: 'string', default: '4' }, rows: { type: 'string', default: '1000' },
      'first-row': { type: 'string', default: '0' }, 'fail-after': { type: 'string' },
      message: { type: 'string', default: 'the producer failed' }, 'wrong-schema': { type: 'boolean' },
      timeout: { type: 'string', default: '120' }, help: { type: 'boolean' },
      token: { type: 'string' }, 'tls-root-certs': { type: 'string' },
      'tls-cert-chain': { type: 'string' }, 'tls-private-key': { type: 'string' },
    },
  });
  if (values.help || !values.uri || !values.table === !values.paimon || (values.producer && !values.paimon)) {
    console.error(USAGE);
    process.exit(values.help ? 0 : 2);
  }
  const int = (name) => {
    const n = Number(values[name]);
    if (!Number.isInteger(n) || n < 0) { console.error(`--${name} must be an integer >= 0\n${USAGE}`); process.exit(2); }
    return n;
  };
  const pem = (name) => {
    if (values[name] === undefined) return null;
    try { return readFileSync(values[name]); } catch (err) { console.error(`cannot read --${name}: ${err.message}`); process.exit(2); }
  };
  return {
    sec: security({
      token: values.token ?? process.env.FLIGHT_PAIMON_TOKEN ?? null, rootCerts: pem('tls-root-certs'),
      certChain: pem('tls-cert-chain'), privateKey: pem('tls-private-key'),
    }),
    uri: values.uri, table: values.table, partition: int('partition'), batches: int('batches'),
    paimon: values.paimon ?? null, producer: values.producer ?? null,
    rows: int('rows'), firstRow: int('first-row'), timeoutS: Number(values.timeout),
    failAfter: values['fail-after'] === undefined ? null : int('fail-after'),
    message: values.message, wrongSchema: Boolean(values['wrong-schema']),
  };
}

// A write (or the close) that waits this long waits for room on the server: say so, once per
// wait, as the Python producers do, so a producer with no reader is not a silent hang.
const STALL_MS = 2000;

async function noticed(promise, notice) {
  const timer = setTimeout(() => console.error(notice()), STALL_MS);
  try {
    return await promise;
  } finally {
    clearTimeout(timer);
  }
}

function waitingFor(o, stream, what) {
  const why = o.paimon === null
    ? `partition ${o.partition} of push table '${o.table}' is full: is a reader running?`
    : `the server's queue of Paimon table '${o.paimon}' is full (serve --commit-bytes): are its commits slow?`;
  return () => `producer.js: waiting for the server to take ${what} (acked up to ${stream.acked}); ${why}`;
}

async function main() {
  const o = options();
  const schema = demoSchema({ wrongSchema: o.wrongSchema });
  let start = 0;
  if (o.producer !== null) {
    // A named producer resumes where the table says; batch SEQ holds the rows of batch index SEQ.
    let last;
    try {
      last = await producerState(o.uri, o.paimon, o.producer, o.timeoutS, o.sec);
    } catch (err) {
      console.error(`error: ${err.message}`);
      process.exit(1);
    }
    console.log(`resume last_seq=${last === null ? 'none' : last}`);
    start = last === null ? 0 : last + 1;
  }
  const target = o.paimon === null ? pushTarget(o.table, o.partition) : paimonTarget(o.paimon, o.producer);
  const stream = new PushStream(o.uri, target, schema, {
    timeoutS: o.timeoutS,
    sec: o.sec,
    onAck: (ack) => console.log(ack.snapshot === undefined ? `ack ${ack.seq}` : `ack ${ack.seq} snapshot=${ack.snapshot}`),
  });
  const count = o.failAfter === null ? o.batches : Math.min(o.failAfter, o.batches);
  try {
    for (let b = start; b < count; b++) {
      const batch = makeBatch(schema, o.firstRow + b * o.rows, o.rows);
      await noticed(stream.writeBatch(batch, o.producer === null ? null : { seq: b }), waitingFor(o, stream, `batch ${b}`));
      console.log(`sent ${b} rows=${o.rows}`);
    }
    if (o.failAfter !== null) {
      await stream.fail(o.message);
      console.log(`failed-in-band ${JSON.stringify(o.message)}`);
    } else {
      await noticed(stream.close(), waitingFor(o, stream, 'the last batches'));
      console.log(o.producer === null ? `done batches=${count} acked=${stream.acked + 1}` : `done last_seq=${stream.acked}`);
    }
  } catch (err) {
    console.error(`error: ${err.message}`);
    process.exitCode = 1;
    stream.client.close();
  }
}

main();
