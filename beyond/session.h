// session.h: cached inference with the extensions a BeyondConfig asks for (config.h) attached: the
// paper's InferenceSession (infer/session.h) plus the hooks (infer/hooks.h) that it owns and whose
// records it hands out, and the readers that replace the paper's: a standard model with a block
// scorer is read by StandardBlockSession (standard_blocks.h). The evaluations (evals/) and the
// program read through it; the paper's reading is a BeyondSession with every extension off.
#pragma once

#include <memory>

#include "beyond/adaptive_k.h"
#include "beyond/certificate.h"
#include "beyond/cmt_skip.h"
#include "beyond/config.h"
#include "beyond/decode_step.h"
#include "beyond/mass_recall.h"
#include "infer/session.h"

namespace lm {

// It owns the hooks it attached: keep it as a BeyondSession (moving it into a plain InferenceSession
// would leave them behind).
class BeyondSession : public InferenceSession {
 public:
  // As InferenceSession; cfg is checked whole (BeyondConfig::validate) before anything is built.
  BeyondSession(const GPT& model, const BeyondConfig& cfg, int32_t landmark_id, int32_t cmt_id = -1);
  // What the extensions recorded, null when the extension is off: the CMT skip (a model with a
  // context-miss token), adaptive k (--left-out), the certificate (--certify or --left-out).
  const CmtSkip* cmt_skip() const { return cmt_skip_.get(); }
  const AdaptiveK* adaptive_k() const { return adaptive_.get(); }
  const Certifier* certifier() const { return certifier_.get(); }
  // With --mass-recall: each (chunk, layer) with blocks to choose from, its rows' agreement with the
  // oracle, in reading order (a standard model's reader keeps its own); empty otherwise.
  const std::vector<OracleAgreement>& oracle_agreements() const;
  // Switches the decode step (BeyondConfig::decode_step) for the tokens fed from now on (tests and
  // benchmarks hold the two paths against each other in one session).
  void set_decode_step(bool on);
  int64_t decode_steps() const { return decode_->steps; }  // tokens that went through it so far

 private:
  std::unique_ptr<DecodeStep> decode_;
  std::unique_ptr<LocalGatesOnce> gates_;
  std::unique_ptr<AdaptiveK> adaptive_;
  std::unique_ptr<CmtSkip> cmt_skip_;
  std::unique_ptr<Certifier> certifier_;
  std::unique_ptr<MassRecall> mass_recall_;
};

// Adds what a reading's extensions recorded to an evaluation's sums (evals/): the blocks attended
// (the CMT skip), adaptive k's rows, blocks kept and rows capped, the certificate's rows, and the
// agreement with the oracle (mass recall), each in reading order.
void add_extension_records(const BeyondSession& s, int64_t* attended, int64_t* adaptive_rows, int64_t* adaptive_blocks,
                           int64_t* adaptive_capped, CertificateStats* certificate, OracleAgreement* oracle);

}  // namespace lm
