// session.cpp: BeyondSession (session.h): the extensions built and attached in the order their
// hooks must run (mass recall sees the plan first, adaptive k keeps fewer, the CMT skip reads
// fewer, the certificate observes the rows).
#include "beyond/session.h"

#include "beyond/standard_blocks.h"
#include "tensor/check.h"

namespace lm {

namespace {
const BeyondConfig& checked(const BeyondConfig& cfg, const GPT& model) {
  cfg.validate();
  LM_CHECK(!(cfg.certify || cfg.left_out >= 0) || model.device() == Device::CPU,
           "inference: --certify and --left-out run on the CPU rows only (the CUDA rows keep their weights on the "
           "device)");
  LM_CHECK(!(cfg.scorer != BlockScorer::Landmark || cfg.mass_recall) || model.device() == Device::CPU,
           "inference: --scorer " << block_scorer_name(cfg.scorer)
                                  << " and --mass-recall run on the CPU (the block summaries are on the host)");
  return cfg;
}

// The paper's session, or (beyond the paper) a standard model read in blocks by a training-free
// scorer behind the same interface.
InferenceSession open_session(const GPT& model, const BeyondConfig& cfg, int32_t landmark_id, int32_t cmt_id) {
  checked(cfg, model);
  if (!model.config().landmark() && cfg.scorer != BlockScorer::Landmark)
    return InferenceSession(std::make_unique<StandardBlockSession>(model, cfg), cfg);
  return InferenceSession(model, cfg, landmark_id, cmt_id);
}
}  // namespace

BeyondSession::BeyondSession(const GPT& model, const BeyondConfig& cfg, int32_t landmark_id, int32_t cmt_id)
    : InferenceSession(open_session(model, cfg, landmark_id, cmt_id)),
      decode_(std::make_unique<DecodeStep>()),
      gates_(std::make_unique<LocalGatesOnce>()) {
  if (cfg.scorer == BlockScorer::Oracle)
    set_token_limit(kOracleMaxTokens, "--scorer oracle: the oracle scores every cached key (dense), for texts");
  if (!model.config().landmark()) return;  // a standard model read in blocks: none of these apply
  set_decode_step(cfg.decode_step);
  const GPTConfig& mc = model.config();
  const DType dtype = model.wte.weight.dtype();
  if (cfg.scorer != BlockScorer::Landmark)
    set_block_scoring([&](int64_t) {
      return std::make_unique<SummaryScoring>(cfg.scorer, mc.n_head, mc.landmark_every, mc.head_size(), cfg.reps,
                                              dtype);
    });
  if (cfg.mass_recall) {  // first: it sees what retrieval chose before adaptive k cuts it
    mass_recall_ = std::make_unique<MassRecall>(mc.n_layer, mc.n_head, mc.landmark_every, mc.head_size(), dtype);
    attach(mass_recall_.get());
  }
  if (cfg.left_out >= 0) {
    adaptive_ = std::make_unique<AdaptiveK>(cfg.left_out, gates_.get());
    attach(adaptive_.get());
  }
  if (model.config().context_miss) {
    cmt_skip_ = std::make_unique<CmtSkip>(cfg.cmt_skip, gates_.get());
    attach(cmt_skip_.get());
  }
  if (cfg.certify || cfg.left_out >= 0) {
    certifier_ = std::make_unique<Certifier>();
    attach(certifier_.get());
  }
}

void BeyondSession::set_decode_step(bool on) {
  set_one_token_path(on ? decode_.get() : nullptr);  // a standard model's reader: nothing to set
}

const std::vector<OracleAgreement>& BeyondSession::oracle_agreements() const {
  static const std::vector<OracleAgreement> kNone;
  if (mass_recall_) return mass_recall_->agreements;
  if (const auto* standard = dynamic_cast<const StandardBlockSession*>(reader())) return standard->agreements();
  return kNone;
}

void add_extension_records(const BeyondSession& s, int64_t* attended, int64_t* adaptive_rows, int64_t* adaptive_blocks,
                           int64_t* adaptive_capped, CertificateStats* certificate, OracleAgreement* oracle) {
  if (s.cmt_skip()) *attended += s.cmt_skip()->attended;
  if (s.adaptive_k()) {
    *adaptive_rows += s.adaptive_k()->count.rows;
    *adaptive_blocks += s.adaptive_k()->count.blocks;
    *adaptive_capped += s.adaptive_k()->count.capped;
  }
  if (s.certifier()) certificate->add(s.certifier()->stats);
  for (const OracleAgreement& a : s.oracle_agreements()) oracle->add(a);
}

}  // namespace lm
