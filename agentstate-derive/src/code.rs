//! Generated code as text with token streams spliced in, which `expand.rs` writes.
//!
//! Text is lexed by the compiler, one call across the proc-macro bridge per run of text. Tokens
//! are spliced in where a span of the user's code must survive: the field types (so that an
//! error in one is reported where it is written, once) and the where-clause predicates through
//! which a field's requirements are reported at the field. Building the same code token by
//! token, as `quote!` does, costs a call across the bridge per few tokens, in a proc macro that
//! is not optimized in a debug build: that was most of what the derive cost a user's build.

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::ToTokens;

/// Generated code: runs of text, spliced token streams, and delimited groups of both. A group
/// is built only where a splice sits inside one; everywhere else its delimiters are text (which
/// must then be balanced within each run).
#[derive(Clone, Default)]
pub struct Code {
    parts: Vec<Part>,
    text: String,
}

#[derive(Clone)]
enum Part {
    Text(String),
    Tokens(TokenStream),
    Group(Delimiter, Code),
}

impl std::fmt::Write for Code {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.text.push_str(s);
        Ok(())
    }
}

impl Code {
    /// Code of `text` alone.
    pub fn text(text: impl Into<String>) -> Code {
        Code {
            parts: Vec::new(),
            text: text.into(),
        }
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty() && self.text.is_empty()
    }

    fn flush(&mut self) {
        if !self.text.is_empty() {
            self.parts.push(Part::Text(std::mem::take(&mut self.text)));
        }
    }

    /// Appends text.
    pub fn s(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Splices tokens in, spans and all.
    pub fn t(&mut self, tokens: impl ToTokens) -> &mut Self {
        self.flush();
        self.parts.push(Part::Tokens(tokens.into_token_stream()));
        self
    }

    /// Splices tokens in unless there are none (which would cut a run of text in two, each
    /// lexed by a call of its own).
    pub fn t_nonempty(&mut self, tokens: &TokenStream) -> &mut Self {
        if !tokens.is_empty() {
            self.t(tokens);
        }
        self
    }

    /// Appends another piece of code.
    pub fn c(&mut self, code: &Code) -> &mut Self {
        if !code.parts.is_empty() {
            self.flush();
            self.parts.extend(code.parts.iter().cloned());
        }
        self.text.push_str(&code.text);
        self
    }

    /// Appends a group delimited by `delimiter` whose content `build` writes.
    pub fn g(&mut self, delimiter: Delimiter, build: impl FnOnce(&mut Code)) -> &mut Self {
        let mut inner = Code::default();
        build(&mut inner);
        let delimiters = match delimiter {
            Delimiter::Parenthesis => Some(("(", ")")),
            Delimiter::Brace => Some(("{", "}")),
            Delimiter::Bracket => Some(("[", "]")),
            Delimiter::None => None,
        };
        match delimiters {
            Some((open, close)) if inner.parts.is_empty() => {
                self.text.push_str(open);
                self.text.push_str(&inner.text);
                self.text.push_str(close);
            }
            _ => {
                self.flush();
                self.parts.push(Part::Group(delimiter, inner));
            }
        }
        self
    }

    /// The tokens, or the text that does not lex (a bug of the derive's).
    pub fn finish(mut self) -> Result<TokenStream, String> {
        self.flush();
        // Whole streams are concatenated in one call: extending a stream with a stream goes
        // through `Extend<TokenTree>`, which takes it apart into trees and rebuilds it.
        let mut streams = Vec::with_capacity(self.parts.len());
        for part in self.parts {
            streams.push(match part {
                Part::Text(text) => lex(&text)?,
                Part::Tokens(tokens) => tokens,
                Part::Group(delimiter, code) => {
                    TokenTree::Group(Group::new(delimiter, code.finish()?)).into()
                }
            });
        }
        let mut out = TokenStream::new();
        out.extend(streams);
        Ok(out)
    }
}

/// Tokens of generated text. In a macro expansion the compiler lexes it, in one call across the
/// bridge (proc-macro2's `FromStr` first lexes it again with its own lexer to check it, which
/// unoptimized in a debug build cost more than everything else the derive did, and which text
/// the derive wrote itself does not need). Outside one, in this crate's tests, proc-macro2 does.
fn lex(text: &str) -> Result<TokenStream, String> {
    if proc_macro::is_available() {
        text.parse::<proc_macro::TokenStream>()
            .map(TokenStream::from)
            .map_err(|e| format!("{e} in `{text}`"))
    } else {
        text.parse::<TokenStream>()
            .map_err(|e| format!("{e} in `{text}`"))
    }
}

/// `tokens` as one token stream of the compiler's (in a macro expansion), so that each splice
/// of it clones a handle instead of copying its tokens.
pub fn handle(tokens: impl ToTokens) -> TokenStream {
    let tokens = tokens.into_token_stream();
    if proc_macro::is_available() {
        TokenStream::from(proc_macro::TokenStream::from(tokens))
    } else {
        tokens
    }
}

/// The most elements a field list's tuple has (the runtime implements its traits for tuples of
/// up to twelve); a longer list nests.
const TUPLE: usize = 12;

/// Writes `items` as a field list: a tuple, nested in tuples of at most [`TUPLE`] elements. The
/// same number of items always gives the same shape, which is how the lists of one state (a
/// plan and the fields it is applied to) fit together.
pub fn tuple(out: &mut Code, mut items: Vec<Code>) {
    while items.len() > TUPLE {
        items = items
            .chunks(TUPLE)
            .map(|chunk| {
                let mut code = Code::default();
                tuple(&mut code, chunk.to_vec());
                code
            })
            .collect();
    }
    out.g(Delimiter::Parenthesis, |g| {
        for item in &items {
            g.c(item).s(",");
        }
    });
}

/// A Rust string literal of `s`.
pub fn lit(s: &str) -> String {
    format!("{s:?}")
}

/// `tokens` with every span set to `span`.
pub fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|token| match token {
            TokenTree::Group(group) => {
                let mut g = Group::new(group.delimiter(), respan(group.stream(), span));
                g.set_span(span);
                TokenTree::Group(g)
            }
            mut other => {
                other.set_span(span);
                other
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proc_macro2::Delimiter::{Brace, Parenthesis};

    #[test]
    fn text_and_splices_make_one_stream() {
        let mut code = Code::text("fn f");
        code.g(Parenthesis, |g| {
            g.s("x: ").t(quote::quote!(Vec<u8>));
        });
        code.s(" -> u8 ").g(Brace, |g| {
            g.s("x[0]");
        });
        let tokens = code.finish().expect("lexes");
        assert_eq!(tokens.to_string(), "fn f (x : Vec < u8 >) -> u8 { x [0] }");
    }

    #[test]
    fn a_long_list_nests_in_tuples_of_twelve() {
        let mut code = Code::default();
        tuple(
            &mut code,
            (0..13).map(|i| Code::text(i.to_string())).collect(),
        );
        let text = code.finish().expect("lexes").to_string();
        assert_eq!(
            text,
            "((0 , 1 , 2 , 3 , 4 , 5 , 6 , 7 , 8 , 9 , 10 , 11 ,) , (12 ,) ,)"
        );
        let mut one = Code::default();
        tuple(&mut one, vec![Code::text("a")]);
        assert_eq!(one.finish().expect("lexes").to_string(), "(a ,)");
    }

    #[test]
    fn unbalanced_text_is_an_error_not_a_panic() {
        let err = Code::text("fn f(").finish().unwrap_err();
        assert!(err.contains("fn f("), "{err}");
    }

    #[test]
    fn literals_escape_quotes() {
        assert_eq!(lit(r#"say "hi"\n"#), r#""say \"hi\"\\n""#);
    }
}
