/* proto/ids.c's identifier parser, pith_id_parse: every form a person
 * types or pastes, what each normalises to, the forms it took before URLs
 * were read (unchanged), and the inputs it refuses with a message that
 * quotes them. */
#include <stdio.h>
#include <string.h>

#include "ids.h"
#include "test_util.h"

#define BODY "AR7B3DEVMOTSBRCCVXUCLYSRRE"
#define NUMBER "pith:2024:" BODY

static pith_id_t id;
static pith_err_t err;

static int parse(const char *s)
{
	memset(&err, 0, sizeof(err));
	return pith_id_parse(s, &id, &err);
}

/* s parses to kind, value and alias_kind */
#define CHECK_ID(s, k, v, ak)                                                  \
	do {                                                                   \
		CHECK_INT_EQ(parse(s), 0);                                     \
		CHECK_INT_EQ(id.kind, k);                                      \
		CHECK_STR_EQ(id.value, v);                                     \
		CHECK_STR_EQ(id.alias_kind, ak);                               \
	} while (0)

TEST(old_forms_unchanged, "gives the forms it took before URLs the same kind, value and alias kind")
{
	CHECK_ID(NUMBER, PITH_ID_FULL, BODY, "");
	CHECK_STR_EQ(id.number, NUMBER);
	CHECK_ID(BODY, PITH_ID_FULL, BODY, "");
	CHECK_STR_EQ(id.number, "");
	CHECK_ID("ar7b3devmotsbrccvxuclysrre", PITH_ID_FULL, BODY, "");
	CHECK_ID("pith:AR7B3DEV", PITH_ID_SHORT, "AR7B3DEV", "pith_short_8");
	CHECK_ID("AR7B3DEVMOTS", PITH_ID_SHORT, "AR7B3DEVMOTS", "pith_short_12");
	CHECK_ID("AR7B3DEVMOTSBRCC", PITH_ID_SHORT, "AR7B3DEVMOTSBRCC", "pith_short_16");
	CHECK_ID("AR7B3DEVMO", PITH_ID_SHORT, "AR7B3DEVMO", "");
	CHECK_ID("arxiv:2401.14489", PITH_ID_ARXIV, "2401.14489", "arxiv");
	CHECK_ID("arXiv:2401.14489", PITH_ID_ARXIV, "2401.14489", "arxiv");
	CHECK_ID("ARXIV:2401.14489v2", PITH_ID_ARXIV, "2401.14489v2", "arxiv_version");
	CHECK_ID("2401.14489", PITH_ID_ARXIV, "2401.14489", "arxiv");
	CHECK_ID("2401.14489v2", PITH_ID_ARXIV, "2401.14489v2", "arxiv_version");
	CHECK_ID("hep-th/9901001", PITH_ID_ARXIV, "hep-th/9901001", "arxiv");
	CHECK_ID("math.GT/0309136v3", PITH_ID_ARXIV, "math.GT/0309136v3", "arxiv_version");
	CHECK_ID("doi:10.48550/ARXIV.2401.14489", PITH_ID_DOI, "10.48550/arxiv.2401.14489", "doi");
	CHECK_ID("DOI:10.48550/arXiv.2401.14489", PITH_ID_DOI, "10.48550/arxiv.2401.14489", "doi");
	CHECK_ID("10.48550/arXiv.2401.14489", PITH_ID_DOI, "10.48550/arxiv.2401.14489", "doi");
	CHECK_ID("doi:10.12", PITH_ID_DOI, "10.12", "doi");
}

TEST(arxiv_split, "keeps an arXiv id's version apart from the id used for lookup")
{
	CHECK_INT_EQ(parse("arXiv:2401.14489v12"), 0);
	CHECK_STR_EQ(id.arxiv, "2401.14489");
	CHECK_INT_EQ(id.arxiv_version, 12);
	CHECK_INT_EQ(parse("2401.14489"), 0);
	CHECK_STR_EQ(id.arxiv, "2401.14489");
	CHECK_INT_EQ(id.arxiv_version, 0);
	CHECK_INT_EQ(parse("hep-th/9901001v3"), 0);
	CHECK_STR_EQ(id.arxiv, "hep-th/9901001");
	CHECK_INT_EQ(id.arxiv_version, 3);
	CHECK_INT_EQ(parse("2401.14489v99999999999999"), 0);
	CHECK_INT_EQ(id.arxiv_version, 4000000000u);
	CHECK_INT_EQ(parse("doi:10.48550/arxiv.2401.14489"), 0);
	CHECK_STR_EQ(id.arxiv, "");
}

TEST(blanks, "drops blanks around an identifier but refuses them inside one")
{
	CHECK_ID("  arXiv:2401.14489\n", PITH_ID_ARXIV, "2401.14489", "arxiv");
	CHECK_ID("\t" NUMBER " \r\n", PITH_ID_FULL, BODY, "");
	CHECK_STR_EQ(id.number, NUMBER);
	CHECK_ID(" https://doi.org/10.48550/arXiv.2401.14489 ", PITH_ID_DOI,
		 "10.48550/arxiv.2401.14489", "doi");
	CHECK_INT_EQ(parse("arXiv: 2401.14489"), PITH_EINVAL);
	CHECK_INT_EQ(parse("   "), PITH_EINVAL);
	CHECK_INT_EQ(parse(""), PITH_EINVAL);
}

TEST(arxiv_urls, "reads arxiv.org abs and pdf URLs, old and new ids, with or without version")
{
	CHECK_ID("https://arxiv.org/abs/2401.14489v2", PITH_ID_ARXIV, "2401.14489v2", "arxiv_version");
	CHECK_STR_EQ(id.arxiv, "2401.14489");
	CHECK_INT_EQ(id.arxiv_version, 2);
	CHECK_ID("https://arxiv.org/abs/2401.14489", PITH_ID_ARXIV, "2401.14489", "arxiv");
	CHECK_ID("http://arxiv.org/pdf/2401.14489.pdf", PITH_ID_ARXIV, "2401.14489", "arxiv");
	CHECK_ID("https://arxiv.org/pdf/2401.14489v3", PITH_ID_ARXIV, "2401.14489v3", "arxiv_version");
	CHECK_ID("https://export.arxiv.org/abs/2401.14489", PITH_ID_ARXIV, "2401.14489", "arxiv");
	CHECK_ID("HTTPS://WWW.ARXIV.ORG/abs/2401.14489/", PITH_ID_ARXIV, "2401.14489", "arxiv");
	CHECK_ID("https://arxiv.org/abs/hep-th/9901001", PITH_ID_ARXIV, "hep-th/9901001", "arxiv");
	CHECK_ID("https://arxiv.org/abs/2401.14489?context=cs#x", PITH_ID_ARXIV, "2401.14489", "arxiv");
	CHECK_ID("arxiv.org/abs/2401.14489", PITH_ID_ARXIV, "2401.14489", "arxiv");
}

TEST(doi_urls, "reads doi.org URLs, escaped or not, and lower-cases the DOI as the store does")
{
	CHECK_ID("https://doi.org/10.48550/arXiv.2401.14489", PITH_ID_DOI, "10.48550/arxiv.2401.14489", "doi");
	CHECK_ID("http://dx.doi.org/10.48550/arXiv.2401.14489", PITH_ID_DOI, "10.48550/arxiv.2401.14489", "doi");
	CHECK_ID("https://doi.org/10.48550%2FarXiv.2401.14489", PITH_ID_DOI, "10.48550/arxiv.2401.14489", "doi");
	CHECK_ID("https://doi.org/10.48550/arXiv.hep-th/9901001", PITH_ID_DOI,
		 "10.48550/arxiv.hep-th/9901001", "doi");
	CHECK_ID("doi.org/10.1103/PhysRevD.1.1", PITH_ID_DOI, "10.1103/physrevd.1.1", "doi");
}

TEST(pith_urls, "reads the registry's record URLs in every shape it publishes")
{
	static const char *const full[] = {
		"https://pith.science/pith/" BODY,
		"https://pith.science/pith/" BODY ".json",
		"https://pith.science/pith/" BODY "/bundle.json",
		"https://pith.science/pith/" BODY "/state.json",
		"https://pith.science/.well-known/pith/" BODY "/bundle.json",
		"https://www.pith.science/pith/" BODY "/",
		"http://PITH.SCIENCE/pith/" BODY "?x=1",
		"pith.science/pith/" BODY,
	};
	for (size_t i = 0; i < sizeof(full) / sizeof(full[0]); i++)
		CHECK_ID(full[i], PITH_ID_FULL, BODY, "");
	CHECK_ID("https://pith.science/pith/pith%3A2024%3A" BODY, PITH_ID_FULL, BODY, "");
	CHECK_STR_EQ(id.number, NUMBER);
	CHECK_ID("https://pith.science/pith/AR7B3DEV", PITH_ID_SHORT, "AR7B3DEV", "pith_short_8");
	CHECK_ID("https://pith.science/paper/AR7B3DEV", PITH_ID_SHORT, "AR7B3DEV", "pith_short_8");
}

TEST(refuses_urls, "refuses URLs of other sites, other paths and URLs without an identifier, quoting them")
{
	static const char *const bad[] = {
		"https://example.org/abs/2401.14489",
		"https://arxiv.org/list/cs.AI/recent",
		"https://arxiv.org/abs/",
		"https://arxiv.org/abs/notanid",
		"https://doi.org/",
		"https://doi.org/11.1/x",
		"https://doi.org/10.48550%2",
		"https://doi.org/10.48550/%00x",
		"https://pith.science/",
		"https://pith.science/pith/" BODY "/events.json",
		"https://pith.science/pith/2401.14489",
		"https://pith.science/pith//" BODY,
		"https://pith.science:8443/pith/" BODY,
		"https://user@pith.science/pith/" BODY,
		"ftp://arxiv.org/abs/2401.14489",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i]) != PITH_EINVAL) {
			test_fail_(__FILE__, __LINE__, "accepted %s", bad[i]);
			continue;
		}
		CHECK_INT_EQ(id.kind, 0);
		CHECK_STR_EQ(id.value, "");
		if (!strstr(err.msg, bad[i]) && strncmp(bad[i], "https://doi.org/10.48550/%00", 28))
			test_fail_(__FILE__, __LINE__, "message '%s' does not quote %s", err.msg, bad[i]);
	}
}

TEST(message_control_bytes, "puts no control byte of the input in a message")
{
	CHECK_INT_EQ(parse("https://pith.science/pith/\x1b[31m"), PITH_EINVAL);
	for (const char *p = err.msg; *p; p++)
		CHECK(*p >= 0x20 && *p < 0x7f);
}

TEST(length_limit, "refuses an identifier over the length limit, blanks around it aside")
{
	char big[400];
	memset(big, 'A', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	CHECK_INT_EQ(parse(big), PITH_EINVAL);
	char padded[PITH_ID_MAX + 40];
	memset(padded, ' ', sizeof(padded));
	memcpy(padded + 20, "arXiv:2401.14489", 16);
	padded[sizeof(padded) - 1] = 0;
	CHECK_INT_EQ(parse(padded), 0);
}

int main(void)
{
	RUN(old_forms_unchanged);
	RUN(arxiv_split);
	RUN(blanks);
	RUN(arxiv_urls);
	RUN(doi_urls);
	RUN(pith_urls);
	RUN(refuses_urls);
	RUN(message_control_bytes);
	RUN(length_limit);
	return test_done();
}
