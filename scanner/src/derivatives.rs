//! `derivatives.yaml` -> derivative entries matched to registry operators.
//! (Being written; see the module docs once complete.)
