//! The conversation in no API's shape: what the assistant answered ([`reply`]), as the
//! conversation core makes it or reads it from its upstream, and as each API surface writes it in
//! its own wire form.

pub mod reply;
