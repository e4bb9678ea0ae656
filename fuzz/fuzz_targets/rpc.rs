//! Fuzzes the RPC packet decoder and the serving side's handlers (calls, copies, syscalls,
//! FreeHandle): the input is a stream of packets as a client would send them after the
//! handshake. Every packet must get a reply or end the session with an error — never a crash,
//! a hang or an unbounded allocation. Two kinds of packet are left out because they act on the
//! world rather than on the session: `kGetGlobalFunc` (which would let the stream call any global
//! function, e.g. ones that load libraries) and `kInitServer` (which calls a named constructor);
//! allocations above 1 MiB are left out to keep memory bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tvm_runtime::rpc::codec::{code, Reader, WireValue};
use tvm_runtime::rpc::endpoint::{handle_request, Channel, Flow, Serving};
use tvm_runtime::rpc::local::LocalSession;

struct Sink(usize);

impl Channel for Sink {
    fn send(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.0 += data.len();
        Ok(())
    }
    fn recv(&mut self, _buf: &mut [u8]) -> std::io::Result<usize> {
        Ok(0)
    }
}

const MAX_PACKET: u64 = 1 << 20;
const MAX_ALLOC: i64 = 1 << 20;

fn allowed(c: i32, body: &[u8]) -> bool {
    match c {
        code::GET_GLOBAL_FUNC | code::INIT_SERVER => false,
        code::DEV_ALLOC_DATA => match Reader::new(body).seq() {
            Ok(v) => matches!(v.get(1), Some(WireValue::Int(n)) if (0..=MAX_ALLOC).contains(n)),
            Err(_) => true,
        },
        code::DEV_ALLOC_DATA_WITH_SCOPE => match Reader::new(body).seq() {
            Ok(v) => match v.first() {
                Some(WireValue::Tensor(t)) => t.nbytes().is_ok_and(|n| n <= MAX_ALLOC as u64),
                _ => true,
            },
            Err(_) => true,
        },
        _ => true,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut serving = Some(Serving::Local(LocalSession::new()));
    let mut sink = Sink(0);
    let mut rest = data;
    while rest.len() >= 12 {
        let n = u64::from_le_bytes(rest[..8].try_into().unwrap());
        if !(4..=MAX_PACKET).contains(&n) || (rest.len() as u64) < 8 + n {
            break;
        }
        let c = i32::from_le_bytes(rest[8..12].try_into().unwrap());
        let body = &rest[12..8 + n as usize];
        rest = &rest[8 + n as usize..];
        if !allowed(c, body) {
            continue;
        }
        match handle_request(&mut serving, &mut sink, c, body, MAX_PACKET) {
            Ok(Flow::Continue) => {}
            Ok(Flow::Stop) | Err(_) => break,
        }
    }
});
