//! After an error: the `Workflow` impl with unreachable bodies, next to `compile_error!`.

use proc_macro2::TokenStream;
use quote::quote;

use super::{private, Gen};

impl Gen<'_> {
    /// After an error: the `Workflow` impl with unreachable bodies, so code using the
    /// workflow still type-checks and one typo yields one error.
    pub(super) fn fallback_impl(&self) -> TokenStream {
        let name = self.name();
        let p = private();
        let input_ident = self.ident("Input");
        let outputs_ident = self.ident("Outputs");
        let tasks_ident = self.ident("Tasks");
        let env = self.env_ty();
        let workflow_name = self.journaled_name();
        quote! {
            impl #name {
                /// The workflow's diagram as Mermaid source (empty: the spec has errors).
                pub const MERMAID: &'static str = "";
                /// The workflow's diagram as Graphviz DOT source (empty: the spec has errors).
                pub const DOT: &'static str = "";
                /// The fingerprint of the spec (empty: the spec has errors).
                pub const FINGERPRINT: &'static str = "";

                /// The checked spec of this workflow.
                pub fn spec() -> &'static #p::workflow_spec::Spec {
                    ::core::unreachable!()
                }

                /// A fresh state machine for one run of this workflow.
                pub fn machine() -> #p::Machine<'static> {
                    ::core::unreachable!()
                }
            }

            #[allow(unused_variables)]
            impl #p::Workflow for #name {
                type Input = #input_ident;
                type Env = #env;
                type Outputs = #outputs_ident;
                type Tasks = #tasks_ident;
                const NAME: &'static str = #workflow_name;
                const FINGERPRINT: &'static str = "";
                const CHILD_DEPTH: usize = 0;
                fn spec() -> &'static #p::workflow_spec::Spec { ::core::unreachable!() }
                fn action(_: usize, _: #p::Invocation<'_, Self>) -> ::core::result::Result<#p::BoxFuture<'_, ::core::result::Result<#p::Value, #p::StepError>>, #p::CallError> { ::core::unreachable!() }
                fn compensate(_: usize, _: #p::Invocation<'_, Self>) -> ::core::result::Result<#p::BoxFuture<'_, ::core::result::Result<(), #p::StepError>>, #p::CallError> { ::core::unreachable!() }
                fn reconcile(_: usize, _: #p::Invocation<'_, Self>) -> ::core::result::Result<#p::BoxFuture<'_, ::core::result::Result<::core::option::Option<#p::Value>, #p::StepError>>, #p::CallError> { ::core::unreachable!() }
                fn condition(_: usize, _: &Self::Input, _: &dyn #p::OutputSource) -> ::core::result::Result<bool, #p::CallError> { ::core::unreachable!() }
                fn proposal(_: usize, _: &Self::Input, _: &dyn #p::OutputSource) -> #p::Value { ::core::unreachable!() }
                fn decision(_: usize, _: #p::Value) -> ::core::result::Result<#p::Value, #p::CallError> { ::core::unreachable!() }
                fn timeout_decision(_: usize, _: bool) -> ::core::result::Result<#p::Value, #p::CallError> { ::core::unreachable!() }
                fn outputs(_: &dyn #p::OutputSource) -> ::core::result::Result<Self::Outputs, #p::CallError> { ::core::unreachable!() }
                fn items(_: usize, _: &Self::Input, _: &dyn #p::OutputSource) -> ::core::result::Result<::std::vec::Vec<#p::Value>, #p::CallError> { ::core::unreachable!() }
                fn child(_: usize, _: &Self::Input, _: &dyn #p::OutputSource) -> ::core::result::Result<#p::ChildStart, #p::CallError> { ::core::unreachable!() }
                fn event(_: usize, _: #p::Value) -> ::core::result::Result<#p::Value, #p::CallError> { ::core::unreachable!() }
            }
        }
    }
}
