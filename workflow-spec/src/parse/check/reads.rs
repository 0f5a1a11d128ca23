//! The names an expression reads: a condition, or the source of a map.

use syn::visit::Visit;
use syn::Ident;

/// The free names a condition reads, first mention first. Names bound inside the
/// condition (closure parameters, `match` arms, `let`, `if let`, `for`) are not reads, nor
/// is the function of a call (`is_weekend(order)` reads `order` only).
pub fn condition_reads(expr: &syn::Expr) -> Vec<Ident> {
    let mut reads = NameReads::default();
    reads.visit_expr(expr);
    reads.names
}

/// Collects the free single-segment names an expression reads (not names it binds,
/// not `true`/`false`, not capitalised constants or paths like `Status::Ok`).
#[derive(Default)]
struct NameReads {
    bound: Vec<String>,
    names: Vec<Ident>,
}

impl NameReads {
    fn bind(&mut self, pat: &syn::Pat) {
        collect_pat_idents(pat, &mut self.bound);
    }

    /// Visits `cond` of an `if` or `while`: `let` patterns bind for the body.
    fn visit_let_condition(&mut self, cond: &syn::Expr) {
        match cond {
            syn::Expr::Let(expr_let) => {
                self.visit_expr(&expr_let.expr);
                self.bind(&expr_let.pat);
            }
            syn::Expr::Binary(binary) if matches!(binary.op, syn::BinOp::And(_)) => {
                self.visit_let_condition(&binary.left);
                self.visit_let_condition(&binary.right);
            }
            other => self.visit_expr(other),
        }
    }
}

impl<'ast> Visit<'ast> for NameReads {
    fn visit_expr_closure(&mut self, closure: &'ast syn::ExprClosure) {
        let before = self.bound.len();
        for input in &closure.inputs {
            self.bind(input);
        }
        self.visit_expr(&closure.body);
        self.bound.truncate(before);
    }

    fn visit_arm(&mut self, arm: &'ast syn::Arm) {
        let before = self.bound.len();
        self.bind(&arm.pat);
        if let Some((_, guard)) = &arm.guard {
            self.visit_expr(guard);
        }
        self.visit_expr(&arm.body);
        self.bound.truncate(before);
    }

    fn visit_block(&mut self, block: &'ast syn::Block) {
        let before = self.bound.len();
        for stmt in &block.stmts {
            self.visit_stmt(stmt);
        }
        self.bound.truncate(before);
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        // The initializer sees the names before the `let`; the rest of the block sees
        // the pattern's bindings (until `visit_block` truncates).
        if let Some(init) = &local.init {
            self.visit_expr(&init.expr);
            if let Some((_, diverge)) = &init.diverge {
                self.visit_expr(diverge);
            }
        }
        self.bind(&local.pat);
    }

    fn visit_expr_if(&mut self, expr: &'ast syn::ExprIf) {
        let before = self.bound.len();
        self.visit_let_condition(&expr.cond);
        self.visit_block(&expr.then_branch);
        self.bound.truncate(before);
        if let Some((_, otherwise)) = &expr.else_branch {
            self.visit_expr(otherwise);
        }
    }

    fn visit_expr_while(&mut self, expr: &'ast syn::ExprWhile) {
        let before = self.bound.len();
        self.visit_let_condition(&expr.cond);
        self.visit_block(&expr.body);
        self.bound.truncate(before);
    }

    fn visit_expr_for_loop(&mut self, expr: &'ast syn::ExprForLoop) {
        self.visit_expr(&expr.expr);
        let before = self.bound.len();
        self.bind(&expr.pat);
        self.visit_block(&expr.body);
        self.bound.truncate(before);
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        // `f(x)` calls a function by name; only a computed callee is read.
        if !matches!(&*call.func, syn::Expr::Path(path) if path.qself.is_none()) {
            self.visit_expr(&call.func);
        }
        for arg in &call.args {
            self.visit_expr(arg);
        }
    }

    fn visit_expr_path(&mut self, path: &'ast syn::ExprPath) {
        if let Some(ident) = path.path.get_ident() {
            let name = ident.to_string();
            let lower = name
                .chars()
                .next()
                .is_some_and(|c| c.is_lowercase() || c == '_');
            if lower && !self.bound.contains(&name) && !self.names.iter().any(|n| *n == name) {
                self.names.push(ident.clone());
            }
        }
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        // The method name is not a read; the receiver and arguments are.
        self.visit_expr(&call.receiver);
        for arg in &call.args {
            self.visit_expr(arg);
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // `matches!(value, pattern)` reads its first argument only: the rest is a pattern.
        // Other macros are read when their arguments are expressions; otherwise their
        // tokens are left to rustc.
        use syn::parse::Parser;
        use syn::punctuated::Punctuated;
        let parse_args = Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        if mac.path.is_ident("matches") {
            let first = |input: syn::parse::ParseStream<'_>| {
                let expr: syn::Expr = input.parse()?;
                let _: proc_macro2::TokenStream = input.parse()?;
                Ok(expr)
            };
            if let Ok(expr) = first.parse2(mac.tokens.clone()) {
                self.visit_expr(&expr);
            }
        } else if let Ok(args) = parse_args.parse2(mac.tokens.clone()) {
            for arg in &args {
                self.visit_expr(arg);
            }
        }
    }
}

fn collect_pat_idents(pat: &syn::Pat, out: &mut Vec<String>) {
    struct Binder<'a>(&'a mut Vec<String>);
    impl<'ast> Visit<'ast> for Binder<'_> {
        fn visit_pat_ident(&mut self, pat: &'ast syn::PatIdent) {
            self.0.push(pat.ident.to_string());
            syn::visit::visit_pat_ident(self, pat);
        }
    }
    Binder(out).visit_pat(pat);
}
