/** Flight DoPut from Node.js: Arrow IPC messages as FlightData over @grpc/grpc-js, acks as PutResults. */

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { Message, Table, tableToIPC } from 'apache-arrow';

const PROTO = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'proto', 'flight.proto');
const CONTINUATION = 0xffffffff;

function loadService() {
  const definition = protoLoader.loadSync(PROTO, { keepCase: true, enums: String, defaults: false });
  return grpc.loadPackageDefinition(definition).arrow.flight.protocol.FlightService;
}

/** Split an Arrow IPC stream into its messages: [{header, body}], the end-of-stream marker dropped. */
export function ipcMessages(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = [];
  let at = 0;
  while (at + 8 <= bytes.byteLength) {
    if (view.getUint32(at, true) !== CONTINUATION) throw new Error(`not an IPC stream at byte ${at}`);
    const headerLength = view.getInt32(at + 4, true);
    if (headerLength === 0) break;
    const header = bytes.subarray(at + 8, at + 8 + headerLength);
    const bodyLength = Number(Message.decode(header).bodyLength);
    const bodyAt = at + 8 + headerLength;
    out.push({ header, body: bytes.subarray(bodyAt, bodyAt + bodyLength) });
    at = bodyAt + bodyLength;
  }
  return out;
}

const asBuffer = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);

/** A gRPC status error with the server's message, as the CLI reports it. */
export class FlightError extends Error {
  constructor(status) {
    // pyarrow servers append the Python traceback to INVALID_ARGUMENT/NOT_FOUND messages;
    // the sentence before it is the server's own message.
    const details = String(status.details ?? '').split('. Detail: Python exception')[0].trim();
    super(`${grpc.status[status.code] ?? status.code}: ${details}`);
    this.code = status.code;
    this.details = details;
  }
}

/**
 * A secured server's credentials (docs/protocol.md, "Security"): `token` is sent on every call as
 * `authorization: Bearer TOKEN`; a grpc+tls:// URI uses TLS with `rootCerts` (the CA of the
 * server's certificate) and, for servers that demand one (mTLS), `certChain` + `privateKey`.
 */
export function security({ token = null, rootCerts = null, certChain = null, privateKey = null } = {}) {
  const metadata = new grpc.Metadata();
  if (token) metadata.set('authorization', `Bearer ${token}`);
  return { metadata, rootCerts, certChain, privateKey };
}

function connect(uri, sec) {
  const tls = uri.startsWith('grpc+tls://');
  const target = uri.replace(/^grpc(\+tcp|\+tls)?:\/\//, '');
  const credentials = tls
    ? grpc.credentials.createSsl(sec.rootCerts, sec.privateKey, sec.certChain)
    : grpc.credentials.createInsecure();
  const Service = loadService();
  return new Service(target, credentials, {
    'grpc.max_send_message_length': -1,
    'grpc.max_receive_message_length': -1,
  });
}

/** Where a DoPut writes: a push partition, a Paimon table (unnamed), or a named producer's write. */
export function pushTarget(name, partition) {
  return { type: 'PATH', path: ['push', name, String(partition)] };
}
export function paimonTarget(table, producer = null) {
  if (producer === null) return { type: 'PATH', path: ['paimon', table] };
  return { type: 'CMD', cmd: Buffer.from(JSON.stringify({ write: table, producer })) };
}

/** A named producer's last committed seq in a Paimon table (DoAction producer_state): null if none. */
export function producerState(uri, table, producer, timeoutS = 30, sec = security()) {
  const client = connect(uri, sec);
  return new Promise((resolve, reject) => {
    const bodies = [];
    const call = client.DoAction(
      { type: 'producer_state', body: Buffer.from(JSON.stringify({ table, producer })) },
      sec.metadata, { deadline: Date.now() + timeoutS * 1000 });
    call.on('data', (result) => bodies.push(Buffer.from(result.body).toString('utf8')));
    call.on('error', (err) => { client.close(); reject(new FlightError(err)); });
    call.on('end', () => { client.close(); resolve(JSON.parse(bodies[0]).last_seq); });
  });
}

/**
 * One DoPut stream into `target` (pushTarget or paimonTarget).
 *
 * `writeBatch` resolves only when gRPC has taken the message (its write callback), so a server
 * that stops reading stalls it: that is the backpressure a producer must feel.
 */
export class PushStream {
  constructor(uri, target, schema, { timeoutS = 120, onAck = () => {}, sec = security() } = {}) {
    this.client = connect(uri, sec);
    this.descriptor = target;
    this.schema = schema;
    this.call = this.client.DoPut(sec.metadata, { deadline: Date.now() + timeoutS * 1000 });
    this.sentSchema = false;
    this.sent = 0; // batches written: the count the end marker carries
    this.acked = -1;
    this.error = null;
    this.pending = null;
    this.finished = new Promise((resolve) => {
      this.call.on('data', (result) => {
        // The ack of each batch: {"seq": N}, and for Paimon writes {"seq": N, "snapshot": S}
        // once committed (docs/protocol.md).
        const ack = JSON.parse(Buffer.from(result.app_metadata).toString('utf8'));
        if (typeof ack.error === 'string') {
          // {"error", "code"}: the stream failed (a failed commit, a newer stream of the producer):
          // send nothing more and half-close; the call's status carries the error.
          this.call.end();
          return;
        }
        this.acked = ack.seq;
        onAck(ack);
      });
      const settle = () => {
        // A refused stream may never call a pending write back: its end settles that wait.
        this.pending?.(this.error ?? new Error('the DoPut stream ended before the write was taken'));
        resolve();
      };
      this.call.on('error', (err) => { this.error = new FlightError(err); settle(); });
      this.call.on('status', (status) => {
        if (status.code !== grpc.status.OK && !this.error) this.error = new FlightError(status);
        settle();
      });
    });
  }

  /** The stream's first message: the schema, with the descriptor naming the target partition. */
  async _start() {
    if (this.sentSchema) return;
    this.sentSchema = true;
    const header = Message.encode(Message.from(this.schema));
    await this._write({ flight_descriptor: this.descriptor, data_header: asBuffer(header) });
  }

  /** Send one batch; `appMetadata` (e.g. a named producer's {"seq": N}) rides on its record batch. */
  async writeBatch(batch, appMetadata = null) {
    await this._start();
    // The encoded stream repeats the schema first; the server has it already.
    const [, ...messages] = ipcMessages(tableToIPC(new Table([batch]), 'stream'));
    for (const [i, { header, body }] of messages.entries()) {
      const message = { data_header: asBuffer(header), data_body: asBuffer(body) };
      if (appMetadata !== null && i === messages.length - 1) {
        message.app_metadata = Buffer.from(JSON.stringify(appMetadata));
      }
      await this._write(message);
    }
    this.sent += 1;
  }

  /** Fail the partition in-band: its reader gets `message` as a Flight error (docs/protocol.md). */
  async fail(message) {
    await this._start();
    await this._write({ app_metadata: Buffer.from(JSON.stringify({ error: message })) });
    return this._finish();
  }

  /**
   * End the stream cleanly: the end marker {"end": N} (docs/protocol.md), then the half-close.
   * Without the marker the server takes the half-close for a crash and fails the partition.
   * Waits for the server's last ack and status; throws its error.
   */
  async close() {
    await this._start();
    await this._write({ app_metadata: Buffer.from(JSON.stringify({ end: this.sent })) });
    return this._finish();
  }

  async _finish() {
    this.call.end();
    await this.finished;
    this.client.close();
    if (this.error) throw this.error;
  }

  _write(message) {
    if (this.error) return Promise.reject(this.error);
    // Writes are awaited one at a time, so one pending slot is enough.
    return new Promise((resolve, reject) => {
      this.pending = reject;
      this.call.write(message, () => { this.pending = null; resolve(); });
    });
  }
}
