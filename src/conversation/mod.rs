//! The conversation in no API's shape: the request ([`request`]) with its messages' content
//! ([`content`]), which each API surface reads its wire request into and identity, strategies,
//! the recall log and hooks read; and what the
//! assistant answered ([`reply`]), as the core makes it or reads it from its upstream and each
//! surface writes it in its own wire form.

pub mod content;
pub mod reply;
pub mod request;
