#!/usr/bin/env node
/** CLI: push deterministic demo batches into a flight-paimon push table, one output line per event. */

import { parseArgs } from 'node:util';
import { demoSchema, makeBatch } from './rows.js';
import { PushStream } from './flight.js';

const USAGE = `usage: producer.js --uri grpc://HOST:PORT --table NAME [--partition 0] [--batches 4]
  [--rows 1000] [--first-row 0] [--fail-after K --message TEXT] [--wrong-schema] [--timeout 120]`;

function options() {
  const { values } = parseArgs({
    options: {
      uri: { type: 'string' }, table: { type: 'string' }, partition: { type: 'string', default: '0' },
      batches: { type: 'string', default: '4' }, rows: { type: 'string', default: '1000' },
      'first-row': { type: 'string', default: '0' }, 'fail-after': { type: 'string' },
      message: { type: 'string', default: 'the producer failed' }, 'wrong-schema': { type: 'boolean' },
      timeout: { type: 'string', default: '120' }, help: { type: 'boolean' },
    },
  });
  if (values.help || !values.uri || !values.table) {
    console.error(USAGE);
    process.exit(values.help ? 0 : 2);
  }
  const int = (name) => {
    const n = Number(values[name]);
    if (!Number.isInteger(n) || n < 0) { console.error(`--${name} must be an integer >= 0\n${USAGE}`); process.exit(2); }
    return n;
  };
  return {
    uri: values.uri, table: values.table, partition: int('partition'), batches: int('batches'),
    rows: int('rows'), firstRow: int('first-row'), timeoutS: Number(values.timeout),
    failAfter: values['fail-after'] === undefined ? null : int('fail-after'),
    message: values.message, wrongSchema: Boolean(values['wrong-schema']),
  };
}

async function main() {
  const o = options();
  const schema = demoSchema({ wrongSchema: o.wrongSchema });
  const stream = new PushStream(o.uri, o.table, o.partition, schema, {
    timeoutS: o.timeoutS, onAck: (seq) => console.log(`ack ${seq}`),
  });
  const count = o.failAfter === null ? o.batches : Math.min(o.failAfter, o.batches);
  try {
    for (let b = 0; b < count; b++) {
      await stream.writeBatch(makeBatch(schema, o.firstRow + b * o.rows, o.rows));
      console.log(`sent ${b} rows=${o.rows}`);
    }
    if (o.failAfter !== null) {
      await stream.fail(o.message);
      console.log(`failed-in-band ${JSON.stringify(o.message)}`);
    } else {
      await stream.close();
      console.log(`done batches=${count} acked=${stream.acked + 1}`);
    }
  } catch (err) {
    console.error(`error: ${err.message}`);
    process.exitCode = 1;
    stream.client.close();
  }
}

main();
