//! Fuzzes every decoder a peer's bytes reach: hello, server frames, and latency messages.
//! None may panic, and what they accept they must accept whole.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tsperf_proto::clock::{Codec, decode_request, decode_response, split_message};
use tsperf_proto::{decode_frame, decode_hello};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((_, used))) = decode_hello(data) {
        assert!(used <= data.len());
    }
    if let Ok(Some((_, used))) = decode_frame(data) {
        assert!(used <= data.len());
    }
    if let Ok(Some((body, used))) = split_message(data) {
        assert!(used <= data.len() && body.len() < used);
        for codec in [Codec::Binary, Codec::Object] {
            let _ = decode_request(body, codec);
            let _ = decode_response(body, codec);
        }
    }
});
