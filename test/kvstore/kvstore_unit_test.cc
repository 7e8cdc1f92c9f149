// KVStore pieces that need no peers: key placement, the built-in optimizer and its state,
// and the "local" store's semantics and argument checks.
#include <catch2/catch.hpp>

#include <cmath>

#include "kolo/kvstore.h"
#include "kvstore/sharding.h"
#include "kvstore/updater.h"

using kolo::kv::place_key;

TEST_CASE("small keys live whole on one server, spread by key", "[kvstore]") {
  std::vector<int> used(4, 0);
  for (int key = 0; key < 40; ++key) {
    auto s = place_key(key, 100, 4, 1000);
    REQUIRE(s.size() == 1);
    CHECK(s[0].offset == 0);
    CHECK(s[0].size == 100);
    REQUIRE(s[0].server >= 0);
    REQUIRE(s[0].server < 4);
    ++used[static_cast<size_t>(s[0].server)];
  }
  for (int u : used) CHECK(u > 0);
  CHECK(place_key(-7, 5, 3, 1000)[0].server >= 0);
  CHECK(place_key(1, 0, 3, 1000).empty());
}

TEST_CASE("big keys are cut into one contiguous slice per server", "[kvstore]") {
  for (int servers : {1, 2, 3, 7}) {
    for (int64_t size : {int64_t{1000}, int64_t{1001}, int64_t{4099}}) {
      auto s = place_key(5, size, servers, 1000);
      REQUIRE(static_cast<int>(s.size()) == servers);
      int64_t next = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        CHECK(s[i].offset == next);
        CHECK(s[i].size >= size / servers);
        CHECK(s[i].size <= size / servers + 1);
        if (servers > 1) CHECK(s[i].server == static_cast<int>(i));
        next += s[i].size;
      }
      CHECK(next == size);
    }
  }
}

TEST_CASE("the optimizer follows MXNet's SGD and Adam rules", "[kvstore]") {
  kolo::KVOptimizer o;
  o.learning_rate = 0.1;
  o.momentum = 0.9;
  o.wd = 0.01;
  o.rescale_grad = 0.5;
  kolo::kv::Updater u(o);
  std::vector<float> w = {1.0f}, g = {2.0f};
  u.apply(0, 0, g, w);  // mom = -0.1*(0.5*2 + 0.01*1) = -0.101
  CHECK(w[0] == Approx(0.899));
  u.apply(0, 0, g, w);  // mom = 0.9*-0.101 - 0.1*(1 + 0.00899)
  CHECK(w[0] == Approx(0.899 - 0.0909 - 0.100899));

  kolo::KVOptimizer a;
  a.kind = "adam";
  a.learning_rate = 0.01;
  kolo::kv::Updater ua(a);
  std::vector<float> wa = {0.5f}, ga = {0.3f};
  ua.apply(1, 0, ga, wa);  // first Adam step moves by lr (m/sqrt(v) = 1 after correction)
  CHECK(wa[0] == Approx(0.49).epsilon(1e-5));

  kolo::KVOptimizer clip = o;
  clip.momentum = 0;
  clip.wd = 0;
  clip.rescale_grad = 1;
  clip.clip_gradient = 0.5;
  kolo::kv::Updater uc(clip);
  std::vector<float> wc = {0.0f}, gc = {10.0f};
  uc.apply(0, 0, gc, wc);
  CHECK(wc[0] == Approx(-0.05));
}

TEST_CASE("optimizer options travel and bad ones are named", "[kvstore]") {
  kolo::KVOptimizer o;
  o.kind = "adam";
  o.learning_rate = 0.003;
  o.beta2 = 0.99;
  auto bytes = kolo::kv::encode(o);
  kolo::KVOptimizer back;
  REQUIRE(kolo::kv::decode(bytes.data(), bytes.size(), &back).is_ok());
  CHECK(back.kind == "adam");
  CHECK(back.learning_rate == 0.003);
  CHECK(back.beta2 == 0.99);
  CHECK_FALSE(kolo::kv::decode(bytes.data(), bytes.size() - 1, &back).is_ok());
  o.kind = "rmsprop";
  CHECK_THAT(kolo::kv::validate(o).message(), Catch::Contains("rmsprop"));
  o.kind = "sgd";
  o.momentum = 1.5;
  CHECK_THAT(kolo::kv::validate(o).message(), Catch::Contains("momentum"));
}

TEST_CASE("lookahead: a pull sees w + momentum*mom; dist_async with momentum SGD only", "[kvstore]") {
  kolo::KVOptimizer o;
  o.learning_rate = 0.5;
  o.momentum = 0.5;
  o.lookahead = true;
  auto bytes = kolo::kv::encode(o);
  kolo::KVOptimizer back;
  REQUIRE(kolo::kv::decode(bytes.data(), bytes.size(), &back).is_ok());
  CHECK(back.lookahead);
  kolo::kv::Updater u(o);
  std::vector<float> w = {1.0f}, seen = w;
  u.look_ahead(0, 0, seen);  // no update yet: no momentum to look ahead with
  CHECK(seen[0] == 1.0f);
  const std::vector<float> g = {1.0f};
  u.apply(0, 0, g, w);  // mom = -0.5, w = 0.5
  u.apply(0, 0, g, w);  // mom = -0.25 - 0.5 = -0.75, w = -0.25
  seen = w;
  u.look_ahead(0, 0, seen);
  CHECK(w[0] == -0.25f);
  CHECK(seen[0] == -0.25f + 0.5f * -0.75f);
  CHECK(kolo::kv::validate_for(o, "dist_async").is_ok());
  CHECK_THAT(kolo::kv::validate_for(o, "dist_sync").message(), Catch::Contains("lookahead is for dist_async"));
  o.momentum = 0;
  CHECK_THAT(kolo::kv::validate(o).message(), Catch::Contains("lookahead needs sgd with momentum"));
  auto kv = kolo::KVStore::create("local");
  o.momentum = 0.9;
  CHECK_THROWS_WITH(kv->set_optimizer(o), Catch::Contains("lookahead is for dist_async"));
}

TEST_CASE("optimizer state saved and loaded per slice", "[kvstore]") {
  kolo::KVOptimizer o;
  o.momentum = 0.9;
  kolo::kv::Updater a(o), b(o), fresh(o);
  std::vector<float> w(5, 1.0f), g(5, 1.0f);
  a.apply(3, 0, g, w);
  auto saved = a.save();
  REQUIRE(b.load(saved.data(), saved.size(), {{{3, 0}, 5}}).is_ok());
  // From the same weights, b (a's momentum loaded) steps as a does; a fresh one does not.
  std::vector<float> wa(5, 1.0f), wb(5, 1.0f), wf(5, 1.0f);
  a.apply(3, 0, g, wa);
  b.apply(3, 0, g, wb);
  fresh.apply(3, 0, g, wf);
  CHECK(wa == wb);
  CHECK(wa != wf);
  CHECK_THAT(b.load(saved.data(), saved.size(), {{{3, 0}, 6}}).message(), Catch::Contains("key 3"));
  CHECK_THAT(b.load(saved.data(), saved.size() - 3, {{{3, 0}, 5}}).message(), Catch::Contains("truncated"));
  kolo::KVOptimizer adam;
  adam.kind = "adam";
  kolo::kv::Updater c(adam);
  CHECK_THAT(c.load(saved.data(), saved.size(), {{{3, 0}, 5}}).message(), Catch::Contains("\"sgd\""));
}

TEST_CASE("the learning-rate schedule runs by update count: warm-up, cosine, final rate", "[kvstore]") {
  kolo::KVOptimizer o;
  o.learning_rate = 1.0;
  o.lr_schedule = "cosine";
  o.warmup_updates = 2;
  o.warmup_begin_lr = 0.2;
  o.max_updates = 6;
  o.final_lr = 0.1;
  // By hand: u=1 warm-up 0.2 + 0.8*1/2; u=2..6 cosine over p = 0, 1/4, 1/2, 3/4, 1; then 0.1.
  const double c = std::cos(M_PI / 4);
  const std::vector<double> rates = {0.6, 1.0, 0.1 + 0.45 * (1 + c), 0.55, 0.1 + 0.45 * (1 - c), 0.1, 0.1};
  kolo::kv::Updater u(o), resumed(o);
  std::vector<float> w = {0.0f}, g = {1.0f};  // plain SGD, gradient 1: each step moves by its rate
  for (size_t i = 0; i < rates.size(); ++i) {
    INFO("update " << i + 1);
    CHECK(kolo::kv::learning_rate_at(o, static_cast<int64_t>(i) + 1) == Approx(rates[i]));
    const float before = w[0];
    u.apply(7, 0, g, w);
    CHECK(before - w[0] == Approx(rates[i]).epsilon(1e-6));
    if (i == 2) {  // a saved state keeps the update count: the resumed holder goes on at u=4
      auto saved = u.save();
      REQUIRE(resumed.load(saved.data(), saved.size(), {{{7, 0}, 1}}).is_ok());
    }
  }
  std::vector<float> wr = {0.0f};
  resumed.apply(7, 0, g, wr);
  CHECK(-wr[0] == Approx(0.55).epsilon(1e-6));

  kolo::KVOptimizer warm;  // warm-up before a constant rate
  warm.learning_rate = 2.0;
  warm.warmup_updates = 4;
  for (int i = 1; i <= 6; ++i) CHECK(kolo::kv::learning_rate_at(warm, i) == Approx(i < 4 ? 2.0 * i / 4 : 2.0));

  auto bytes = kolo::kv::encode(o);
  kolo::KVOptimizer back;
  REQUIRE(kolo::kv::decode(bytes.data(), bytes.size(), &back).is_ok());
  CHECK(back.lr_schedule == "cosine");
  CHECK(back.warmup_updates == 2);
  CHECK(back.warmup_begin_lr == 0.2);
  CHECK(back.max_updates == 6);
  CHECK(back.final_lr == 0.1);

  o.max_updates = 2;
  CHECK_THAT(kolo::kv::validate(o).message(), Catch::Contains("max_updates 2 must exceed warmup_updates 2"));
  o.lr_schedule = "poly";
  CHECK_THAT(kolo::kv::validate(o).message(), Catch::Contains("lr_schedule \"poly\""));
  warm.warmup_updates = -1;
  CHECK_THAT(kolo::kv::validate(warm).message(), Catch::Contains("warmup_updates -1"));
}

TEST_CASE("local store: push sums, updater applies, pull reads", "[kvstore]") {
  auto kv = kolo::KVStore::create("local");
  CHECK(kv->rank() == 0);
  CHECK(kv->num_workers() == 1);
  std::vector<float> v = {1, 2, 3}, g1 = {1, 1, 1}, g2 = {2, 2, 2}, out(3);
  kv->init(7, kolo::TensorView::of(v));
  kv->push({7, 7}, {kolo::TensorView::of(g1), kolo::TensorView::of(g2)});  // same key: summed
  kv->pull(7, kolo::TensorView::of(out));
  CHECK(out == std::vector<float>{3, 3, 3});  // no updater: the store keeps the sum
  CHECK(g1 == std::vector<float>{1, 1, 1});   // inputs untouched
  kv->set_updater([](int, int64_t, std::span<const float> g, std::span<float> w) {
    for (size_t i = 0; i < w.size(); ++i) w[i] += 10 * g[i];
  });
  kv->pushpull({7}, {kolo::TensorView::of(g1)}, {kolo::TensorView::of(out)});
  CHECK(out == std::vector<float>{13, 13, 13});
  CHECK_THROWS_WITH(kv->run_server(), Catch::Contains("not a server"));
  CHECK_THROWS_WITH(kolo::KVStore::create("dist_snyc"), Catch::Contains("unknown type \"dist_snyc\""));
  std::vector<float> wrong(4);
  CHECK_THROWS_WITH(kv->push(7, kolo::TensorView::of(wrong)), Catch::Contains("shape [4] but init gave [3]"));
  CHECK_THROWS_WITH(kv->push({7}, std::vector<kolo::TensorView>{}), Catch::Contains("1 keys but 0 values"));
}

TEST_CASE("16-bit values are kept as float32 and rounded on pull", "[kvstore]") {
  using kolo::Half;
  using kolo::BFloat16;
  auto kv = kolo::KVStore::create("local");
  auto halves = [](std::initializer_list<float> xs) {
    std::vector<Half> h;
    for (float x : xs) h.push_back(kolo::float_to_half(x));
    return h;
  };
  std::vector<Half> w = halves({1.0f, 2048.0f}), g1 = halves({0.5f, 1.0f}), g2 = halves({0.25f, 1.0f}), out(2);
  kv->init(1, kolo::TensorView::of(w.data(), {2}));
  kv->set_optimizer({.kind = "sgd", .learning_rate = 1.0});
  // Summed and applied in float32: 2048 - 2 is exact there (and in fp16); 1 - 0.75 = 0.25.
  kv->push({1, 1}, {kolo::TensorView::of(g1.data(), {2}), kolo::TensorView::of(g2.data(), {2})});
  kv->pull(1, kolo::TensorView::of(out.data(), {2}));
  CHECK(kolo::half_to_float(out[0]) == 0.25f);
  CHECK(kolo::half_to_float(out[1]) == 2046.0f);
  // float32 master weights: 2046 - 0.5 four times is 2044; an fp16 weight would never move
  // (fp16's spacing is 1 here: 2045.5 rounds back to 2046).
  std::vector<Half> small = halves({0.0f, 0.5f});
  for (int i = 0; i < 4; ++i) kv->push(1, kolo::TensorView::of(small.data(), {2}));
  kv->pull(1, kolo::TensorView::of(out.data(), {2}));
  CHECK(kolo::half_to_float(out[1]) == 2044.0f);

  std::vector<BFloat16> b = {kolo::float_to_bf16(3.0f)}, bout(1);
  kv->init(2, kolo::TensorView::of(b.data(), {1}));
  kv->pull(2, kolo::TensorView::of(bout.data(), {1}));
  CHECK(kolo::bf16_to_float(bout[0]) == 3.0f);

  std::vector<float> f(2);
  CHECK_THROWS_WITH(kv->push(1, kolo::TensorView::of(f)), Catch::Contains("key 1: dtype float32 but init gave float16"));
  std::vector<double> d(2);
  CHECK_THROWS_WITH(kv->init(3, kolo::TensorView::of(d)),
                    Catch::Contains("key 3: dtype float64, but the store holds float32"));
}
