package lessons_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// simplifiedOnly pairs common Simplified Chinese characters with their
// Traditional forms, two runes a pair. The list was written for this test
// from the simplification tables of the PRC's 通用规范汉字表 (2013, itself
// from the 简化字总表 of 1986): the characters of everyday and technical
// text whose Traditional form differs, left out where the Simplified form
// is itself a Traditional character in use in Taiwan (台 云 里 干 于 余 只
// 面 系 范 松 斗 冲 采 并 才 划 征 朴 几 万 着 for example), and variants
// Taiwan's text sometimes carries (强 温 静 黄 够 户 挂 届 虚 猫 迹 踪).
// Any of them in lessons/zh-TW is a slip of a Simplified input method or a
// copy from mainland text.
const simplifiedOnly = "" +
	"这這们們个個来來时時会會说說为為与與发發后後进進动動对對开開关關网網络絡据據设設该該让讓" +
	"实實现現应應从從过過还還将將点點间間问問题題机機数數统統镜鏡连連运運东東车車长長门門马馬" +
	"鸟鳥鱼魚见見贝貝页頁风風飞飛龙龍义義乐樂书書买買卖賣爱愛国國图圖园園团團围圍听聽号號叶葉" +
	"华華协協单單卫衛厂廠广廣庆慶库庫废廢张張归歸当當录錄彻徹忆憶态態总總怀懷战戰执執扩擴扫掃" +
	"报報担擔拟擬择擇换換损損摄攝敌敵无無旧舊显顯晓曉术術杀殺权權条條极極构構标標样樣档檔检檢" +
	"楼樓欢歡气氣没沒沟溝泽澤测測浏瀏济濟满滿滚滾灭滅灯燈热熱状狀独獨环環电電画畫畅暢疗療监監" +
	"盖蓋码碼础礎确確离離种種积積称稱稳穩穷窮竞競笔筆签簽简簡类類级級纪紀线線组組细細终終经經" +
	"结結给給绝絕继繼续續维維编編缓緩缩縮罗羅联聯肤膚胜勝脑腦节節获獲虑慮补補装裝览覽规規视視" +
	"计計订訂认認讨討训訓议議记記讲講许許论論识識诉訴词詞译譯试試诗詩询詢语語误誤请請读讀调調" +
	"谁誰负負责責败敗账帳货貨质質购購费費资資赖賴赶趕跃躍转轉轮輪软軟轻輕较較载載输輸边邊迁遷" +
	"远遠迟遲选選递遞邮郵释釋钥鑰钟鐘钱錢铁鐵链鏈错錯锁鎖键鍵闭閉闲閒阅閱队隊阶階际際陆陸隐隱" +
	"难難须須顶頂项項顺順预預领領频頻颜顏额額饭飯馆館驱驅验驗体體专專业業丢丟两兩严嚴丰豐临臨" +
	"举舉么麼习習乡鄉乱亂争爭亏虧亚亞产產亲親亿億仅僅仓倉价價众眾优優传傳伤傷伪偽侧側储儲兴興" +
	"处處备備复復头頭夸誇夺奪奋奮妇婦学學宝寶审審宽寬导導层層属屬岁歲师師币幣帅帥带帶帮幫庄莊" +
	"异異弃棄弹彈径徑忧憂恋戀恶惡悬懸惊驚惯慣戏戲护護拥擁拦攔挤擠挥揮携攜摆擺断斷昼晝暂暫杂雜" +
	"杨楊枪槍栏欄树樹桥橋梦夢汇匯汉漢泪淚洁潔浅淺润潤涨漲渐漸湾灣灵靈烦煩烧燒牵牽犹猶猎獵盘盤" +
	"碍礙礼禮祸禍笼籠筑築篮籃粮糧紧緊纯純纳納纸紙练練织織绍紹绑綁综綜绿綠罚罰翘翹耸聳职職肃肅" +
	"肠腸脏髒舰艦艺藝药藥虽雖蚀蝕蜡蠟袭襲观觀觉覺触觸誉譽谈談谢謝谱譜贡貢贴貼贵貴贸貿赏賞赢贏" +
	"趋趨践踐躯軀辅輔辆輛辑輯辞辭达達适適逻邏邻鄰酱醬针針钉釘铃鈴银銀销銷锅鍋锋鋒闪閃闹鬧闻聞" +
	"阀閥阵陣阳陽阴陰陈陳险險随隨隶隸双雙鸡雞雾霧韩韓顾顧顿頓飘飄饮飲饰飾饱飽馈饋驾駕驻駐骑騎" +
	"骗騙鲁魯鲜鮮鸣鳴麦麥齐齊齿齒龄齡尽盡启啟压壓历歷厉厲县縣参參变變叠疊吗嗎员員呜嗚响響哑啞" +
	"坏壞块塊坚堅场場垒壘声聲壳殼宁寧宠寵尔爾尘塵尝嘗岗崗帐帳庙廟弯彎扑撲扬揚扰擾抢搶拨撥挡擋" +
	"挣掙捡撿掷擲揽攬敛斂晒曬枣棗柠檸栈棧栋棟桩樁毕畢汤湯洒灑浊濁涡渦湿濕滤濾滥濫潜潛灾災炉爐" +
	"烂爛焕煥琐瑣盐鹽睁睜矿礦砖磚粪糞纠糾红紅纤纖约約纬緯绕繞绘繪绩績肿腫胁脅脉脈脚腳腾騰苏蘇" +
	"荐薦莱萊营營蓝藍蚁蟻衔銜裤褲讯訊访訪证證评評诊診详詳诸諸课課谓謂财財贯貫贷貸赋賦赛賽赵趙" +
	"轨軌轴軸违違遗遺郑鄭酝醞钓釣钢鋼钩鉤铜銅铺鋪锐銳锤錘闸閘雏雛顽頑饥飢驶駛骤驟鸭鴨"

// glossaryForbidden reads the forbidden forms of GLOSSARY.md's section
// "禁用的寫法": lines "- FORM → USE：WHY".
func glossaryForbidden(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(strings.TrimPrefix(line, "## ")) == "禁用的寫法"
			continue
		}
		if !in || !strings.HasPrefix(line, "- ") {
			continue
		}
		form, use, ok := strings.Cut(strings.TrimPrefix(line, "- "), " → ")
		if !ok || strings.TrimSpace(form) == "" {
			t.Fatalf("%s: %q is not \"- FORM → USE：WHY\"", path, line)
		}
		out[strings.TrimSpace(form)] = use
	}
	if len(out) == 0 {
		t.Fatalf("%s has no section \"## 禁用的寫法\" with lines \"- FORM → USE：WHY\"", path)
	}
	return out
}

// TestZhTWUsage: lessons/zh-TW is written in Taiwan's usage: no Simplified
// character anywhere (the glossary included), and none of the forms the
// glossary forbids in the lessons and the README.
func TestZhTWUsage(t *testing.T) {
	pairs := []rune(simplifiedOnly)
	if len(pairs)%2 != 0 {
		t.Fatalf("simplifiedOnly has an odd number of runes (%d): it is pairs", len(pairs))
	}
	traditional := map[rune]rune{}
	for i := 0; i < len(pairs); i += 2 {
		if pairs[i] == pairs[i+1] {
			t.Fatalf("simplifiedOnly pairs %c with itself", pairs[i])
		}
		traditional[pairs[i]] = pairs[i+1]
	}
	for s := range traditional {
		if _, both := traditional[traditional[s]]; both {
			t.Fatalf("simplifiedOnly lists %c as Traditional and as Simplified", traditional[s])
		}
	}
	forbidden := glossaryForbidden(t, filepath.Join("zh-TW", "GLOSSARY.md"))
	files, err := filepath.Glob(filepath.Join("zh-TW", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no lessons/zh-TW/*.md (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(data), "\n") {
			for _, r := range line {
				if tr, ok := traditional[r]; ok {
					t.Errorf("%s:%d: Simplified %c (Traditional %c): %s", f, n+1, r, tr, line)
				}
			}
			if filepath.Base(f) == "GLOSSARY.md" {
				continue // it names the forms it forbids
			}
			for form, use := range forbidden {
				if strings.Contains(line, form) {
					t.Errorf("%s:%d: %q, which GLOSSARY.md forbids (use %s): %s", f, n+1, form, use, line)
				}
			}
		}
	}
}
